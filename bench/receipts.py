"""receipts: sealing, exporting and verifying one run's receipt in a ledger of 1,000,000 events, as whole processes.

The world, built once through the real CLI and cached in bench/.work/receipts-<size>-<schema>: a git repository
whose ledger is the cached mixed ledger of that size (bench/common.cached_ledger) plus one run integrated in it
(a task, a worker's candidate with a passing required check, a confirmed handoff, one merge into a branch nobody
has checked out), not sealed yet, and a signing key. Two copies of its ledger are kept: cold (no Merkle block
hashes kept: a ledger written before docket kept them, never sealed since) and warm (every complete block's
hash kept, as the appends of this version keep them). Each round, cold and warm taking turns, the ledger and
views are restored from a copy, then, each timed as a whole process:

- ``docket seal RUN`` + ``docket export RUN --key K --out F``. Goal: under 3 s together;
- ``docket verify-receipt F --key PUB``. Goal: under 0.5 s.

And in this process, the RFC 9162 root over every position: ``ledger_tree`` from the digests alone (nothing kept)
against ``ledger_tree`` from the kept block hashes (plus the digests of the last, partial block). Goal: at least
10x faster kept.

    python -m bench receipts [--quick]      # quick: 100,000 events
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

from .common import BIN, WORK, Row, cached_ledger, interleaved, log, median, schema_tag, spread

SEAL_AND_EXPORT_GOAL = 3.0
VERIFY_GOAL = 0.5
ROOT_GOAL = 10.0
RUN = "bench-run"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.com"}


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}, **GIT_ENV}


def _docket(repo: Path, *args: str) -> str:
    done = subprocess.run([str(BIN / "docket"), *args], cwd=repo, env=_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"docket {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=_env(), check=True, capture_output=True)


def _checkpoint(path: Path) -> None:
    """Fold the WAL into the file, so one file is the whole database."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def world(size: int) -> Path:
    """The cached world of that size: repo/ with an integrated, unsealed run; cold/ and warm/ ledger copies; keys."""
    folder = WORK / f"receipts-{size}-{schema_tag()}"
    if (folder / "ready").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    repo = folder / "repo"
    repo.mkdir(parents=True)
    log(f"building the receipts world of {size:,} events in {folder.name}")
    t0 = time.perf_counter()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("bench\n")
    _git(repo, "add", "README.md")
    _git(repo, "commit", "-q", "-m", "first")
    _git(repo, "branch", "release")
    (repo / "docket.toml").write_text('[checks.ok]\ncommand = ["true"]\n')
    state = repo / ".git" / "docket"
    state.mkdir()
    shutil.copyfile(cached_ledger(size), state / "ledger.sqlite")
    _docket(repo, "init")
    _docket(repo, "run", "open", "--target", "release", "--goal", "the benchmark's run", "--id", RUN)
    _docket(repo, "task", "plan", RUN, "--title", "make one file", "--id", "task-1")
    launched = json.loads(_docket(repo, "worker", "launch", RUN, "--task", "task-1", "--json", "--", "sh", "-c",
                                  "echo one > one.txt"))
    binding = launched["pin"]["candidate"]["binding_id"]
    _docket(repo, "check", "run", binding, "--check", "ok")
    _docket(repo, "handoff", "offer", binding)
    _docket(repo, "integrate", RUN)
    _docket(repo, "key", "generate", "--out", str(folder / "key"))
    for name in ("ledger.sqlite", "views.sqlite"):
        _checkpoint(state / name)
    for copy in ("cold", "warm"):
        (folder / copy).mkdir()
        for name in ("ledger.sqlite", "views.sqlite"):
            shutil.copyfile(state / name, folder / copy / name)
    _forget_blocks(folder / "cold" / "ledger.sqlite")
    _keep_blocks(folder / "warm" / "ledger.sqlite")
    (folder / "ready").write_text("")
    log(f"built in {time.perf_counter() - t0:.1f} s")
    return folder


def _keep_blocks(path: Path) -> None:
    from docket.adapters.service_layer.kernel.ledger import Ledger
    from docket.adapters.service_layer.kernel.ledger_tree import ledger_tree
    from docket.adapters.world.ledger.reader import ledger_reader

    ledger = Ledger(path)
    with ledger_reader(path) as reader:
        ledger_tree(reader, reader.head_position(), keep=ledger.keep_merkle_nodes)
    ledger.close()
    _checkpoint(path)


def _forget_blocks(path: Path) -> None:
    """As a ledger written before docket kept Merkle block hashes."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM merkle_nodes")
    conn.close()


def _restore(folder: Path, copy: str) -> None:
    state = folder / "repo" / ".git" / "docket"
    for name in ("ledger.sqlite", "views.sqlite"):
        for suffix in ("-wal", "-shm"):
            Path(f"{state / name}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(folder / copy / name, state / name)


def _timed(repo: Path, *args: str) -> float:
    t0 = time.perf_counter()
    _docket(repo, *args)
    return time.perf_counter() - t0


def _round(folder: Path, copy: str, figures: dict[str, list[float]]) -> None:
    _restore(folder, copy)
    repo, bundle = folder / "repo", folder / f"{copy}.intoto.jsonl"
    bundle.unlink(missing_ok=True)
    seal = _timed(repo, "seal", RUN)
    export = _timed(repo, "export", RUN, "--key", str(folder / "key.key"), "--out", str(bundle))
    figures[f"{copy} seal"].append(seal)
    figures[f"{copy} export"].append(export)
    figures[f"{copy} seal+export"].append(seal + export)
    figures[f"{copy} verify-receipt"].append(_timed(repo, "verify-receipt", str(bundle), "--key",
                                                    str(folder / "key.pub")))


def _roots(folder: Path, rounds: int) -> dict[str, list[float]]:
    from docket.adapters.service_layer.kernel.ledger_tree import ledger_tree
    from docket.adapters.world.ledger.reader import ledger_reader

    with ledger_reader(folder / "cold" / "ledger.sqlite") as cold, \
            ledger_reader(folder / "warm" / "ledger.sqlite") as warm:
        size = cold.head_position()
        assert ledger_tree(cold, size).root() == ledger_tree(warm, size).root()
        return interleaved({"rebuilt": lambda: ledger_tree(cold, size).root(),
                            "kept": lambda: ledger_tree(warm, size).root()}, rounds)


def run(quick: bool) -> list[Row]:
    size = 100_000 if quick else 1_000_000
    rounds = 2 if quick else 3
    folder = world(size)
    figures: dict[str, list[float]] = {f"{copy} {what}": [] for copy in ("cold", "warm")
                                       for what in ("seal", "export", "seal+export", "verify-receipt")}
    for i in range(rounds):
        for copy in (("cold", "warm") if i % 2 == 0 else ("warm", "cold")):
            _round(folder, copy, figures)
    roots = _roots(folder, 5 if quick else 7)
    rows = []
    for copy, said in (("cold", "no block hashes kept before"), ("warm", "block hashes kept as appended")):
        both = figures[f"{copy} seal+export"]
        rows.append(Row("receipts", f"seal + export, {said}: seal {median(figures[f'{copy} seal']):.2f} s, export "
                                    f"{median(figures[f'{copy} export']):.2f} s, n = {size:,} ({spread(both)})",
                        median(both), "s", goal=f"< {SEAL_AND_EXPORT_GOAL:g} s",
                        passed=median(both) < SEAL_AND_EXPORT_GOAL))
    verify = figures["cold verify-receipt"] + figures["warm verify-receipt"]
    rows.append(Row("receipts", f"verify-receipt of the bundle, n = {size:,} ({spread(verify)})", median(verify), "s",
                    goal=f"< {VERIFY_GOAL:g} s", passed=median(verify) < VERIFY_GOAL))
    rebuilt, kept = median(roots["rebuilt"]), median(roots["kept"])
    rows.append(Row("receipts", f"Merkle root over {size:,} leaves from the digests ({spread(roots['rebuilt'])})",
                    rebuilt, "s"))
    rows.append(Row("receipts", f"Merkle root from the kept block hashes ({spread(roots['kept'])})", kept, "s",
                    ratio=rebuilt / kept, goal=f"rebuilt / kept >= {ROOT_GOAL:g}", passed=rebuilt / kept >= ROOT_GOAL))
    return rows


if __name__ == "__main__":
    import sys

    from .common import table

    print(table(run("--quick" in sys.argv)))
