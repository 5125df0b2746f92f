"""An agent that leaves a daemon behind: double-forked, setsid, its environment cleared (no DOCKET_* mark), working
in the agent's workspace; it records the daemon's pid in its TMPDIR, then does the task's work and exits."""

import os
import sys
import time
from pathlib import Path

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        Path(os.environ["TMPDIR"], "leaver.pid").write_text(str(os.getpid()))
        os.execve("/bin/sleep", ["sleep", "300"], {})
    os._exit(0)
os.wait()
deadline = time.monotonic() + 10
while not Path(os.environ["TMPDIR"], "leaver.pid").exists() and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
Path("a.py").write_text("X = 1\n")
