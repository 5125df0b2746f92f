"""Run every benchmark, print one table and write bench/.work/results.json.

    python -m bench            # the full run (make bench), a few minutes
    python -m bench --quick    # smaller ledgers and fewer saves
    python -m bench verify status   # only some benchmarks
"""

from __future__ import annotations

import argparse
import json
import time

from . import (append, batch, go, growth, idle, launch, merge_step, merkle, pin, postgres, queue, real_aider,
               rebuild, receipts, requests, sandbox, scale, startup, startup_change, status, streams, verify,
               workspaces)
from .common import WORK, machine, table

BENCHMARKS = {"append": append, "verify": verify, "rebuild": rebuild, "status": status, "growth": growth,
              "streams": streams, "startup": startup, "startup_change": startup_change, "idle": idle, "launch": launch,
              "pin": pin, "workspaces": workspaces, "sandbox": sandbox, "merkle": merkle, "receipts": receipts, "go": go,
              "merge_step": merge_step, "batch": batch, "queue": queue, "scale": scale, "real_aider": real_aider,
              "postgres": postgres, "requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller ledgers and fewer saves")
    parser.add_argument("only", nargs="*", choices=[[], *BENCHMARKS], metavar="NAME",
                        help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})")
    args = parser.parse_args()
    names = args.only or list(BENCHMARKS)
    started = time.perf_counter()
    rows = []
    for name in names:
        t0 = time.perf_counter()
        print(f"running {name} ...", flush=True)
        rows += BENCHMARKS[name].run(args.quick)
        print(f"  {name} took {time.perf_counter() - t0:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    print()
    print(table(rows))
    missed = [r for r in rows if r.passed is False]
    print(f"\n{sum(r.passed is True for r in rows)} goal(s) met, {len(missed)} missed; {elapsed:.0f} s in all")
    WORK.mkdir(parents=True, exist_ok=True)
    results = {"machine": machine(), "quick": args.quick, "seconds": round(elapsed, 1),
               "results": [r.as_dict() for r in rows]}
    (WORK / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {WORK / 'results.json'}")


if __name__ == "__main__":
    main()
