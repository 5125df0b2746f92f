"""A small agent for tests: does what its options say, in order, then exits.

Files named relatively are in its working directory (the task's worktree).

  --print LINE          print LINE (flushed)
  --write NAME=TEXT     write TEXT to the file NAME
  --copy SRC=DST        copy the file SRC to DST (fails if SRC is missing)
  --stdin-to NAME       copy standard input to the file NAME
  --identity-to NAME    write JSON {pid, pgid, start_time} (start_time: field 22 of /proc/self/stat)
  --env-to NAME         write JSON {name: value} of its environment
  --listen              listen on DOCKET_PORT (127.0.0.1) until it exits: fails if the port is taken
  --ignore-term         ignore SIGTERM (from then on; grandchildren inherit it)
  --grandchildren N     start N `sleep 600` in its own process group; their pids go to grandchildren.json
  --keep-printing S     print a line every 0.1 s for S seconds
  --sleep S             sleep S seconds
  --exit CODE           the exit code (default 0)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def start_time() -> str:
    stat = Path("/proc/self/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()[22 - 3]  # fields after "(comm)" start at field 3


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripted_agent")
    parser.add_argument("--exit", type=int, default=0)
    steps = parser.add_argument_group("steps, done in the order given")
    for name in ("print", "write", "copy", "stdin-to", "identity-to", "env-to", "grandchildren", "keep-printing",
                 "sleep"):
        steps.add_argument(f"--{name}", dest="steps", action="append", type=lambda v, n=name: (n, v))
    for name in ("ignore-term", "listen"):
        steps.add_argument(f"--{name}", dest="steps", action="append_const", const=(name, ""))
    args = parser.parse_args(argv)
    listening = []
    for step, value in args.steps or []:
        if step == "print":
            print(value, flush=True)
        elif step == "write":
            name, _, text = value.partition("=")
            Path(name).write_text(text)
        elif step == "copy":
            source, _, target = value.partition("=")
            shutil.copyfile(source, target)
        elif step == "stdin-to":
            Path(value).write_bytes(sys.stdin.buffer.read())
        elif step == "identity-to":
            Path(value).write_text(json.dumps({"pid": os.getpid(), "pgid": os.getpgid(0), "start_time": start_time()}))
        elif step == "env-to":
            Path(value).write_text(json.dumps(dict(os.environ)))
        elif step == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif step == "listen":
            listening.append(socket.create_server(("127.0.0.1", int(os.environ["DOCKET_PORT"]))))
        elif step == "grandchildren":
            pids = [subprocess.Popen(["sleep", "600"]).pid for _ in range(int(value))]
            Path("grandchildren.json").write_text(json.dumps(pids))
        elif step == "keep-printing":
            end = time.monotonic() + float(value)
            while time.monotonic() < end:
                print("still working", flush=True)
                time.sleep(0.1)
        elif step == "sleep":
            time.sleep(float(value))
    return args.exit


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
