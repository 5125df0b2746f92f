"""An agent for the execution-rewriting attack. Its prompt (file, argv[1]) says "honest" or "evil". Honest: writes
a.py. Evil: leaves a broken file and starts a detached daemon that, for a minute, writes the good file into every
check execution it can find, then puts the broken one back, as the issue's attacker did."""

import os
import sys
import time
from pathlib import Path

prompt = Path(sys.argv[1]).read_text()
if "honest" in prompt:
    Path("a.py").write_text("X = 1\n")
    sys.exit(0)
Path("b.py").write_text("B = broken\n")
executions = Path(os.environ["DOCKET_LEDGER"]).parent / "executions"
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 3)
        log = Path(os.environ["TMPDIR"], "rewriter.log")
        log.write_text(f"{os.getpid()}\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for target in executions.glob("*/*/*/b.py"):
                try:
                    target.write_text("B = 2\n")
                    with log.open("a") as f:
                        f.write(f"rewrote {target}\n")
                except OSError as e:
                    with log.open("a") as f:
                        f.write(f"denied {target}: {e}\n")
            time.sleep(0.01)
        os._exit(0)
    os._exit(0)
os.wait()
time.sleep(0.2)
