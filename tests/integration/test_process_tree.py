"""The process tree (process_tree.py) and the orphan scan of a resume (PsutilProcesses.find_orphans_in), on real
processes: an orphan working where docket launches is found; a process there with a living parent never is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from docket.adapters.world.processes import PsutilProcesses

ORPHAN = '''
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.chdir(sys.argv[1])
        open(os.path.join(sys.argv[1], "orphan.pid"), "w").write(str(os.getpid()))
        os.execve("/bin/sleep", ["sleep", "60"], {})
    os._exit(0)
os.wait()
'''


def test_an_orphan_working_in_a_launch_folder_is_found_and_a_process_with_a_living_parent_is_not(tmp_path: Path):
    folder = tmp_path / "worktrees" / "r1" / "t1"
    folder.mkdir(parents=True)
    processes = PsutilProcesses()
    watched = subprocess.Popen(["sleep", "60"], cwd=folder)  # a user's shell there: its parent lives
    subprocess.run([sys.executable, "-c", ORPHAN, str(folder)], check=True)
    deadline = time.monotonic() + 10
    while not (folder / "orphan.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    orphan = int((folder / "orphan.pid").read_text())
    try:
        found = {identity.pid for identity in processes.find_orphans_in([tmp_path / "worktrees"])}
        if os.getppid() != 1 and processes.identity(orphan) is not None:
            parent = int(Path(f"/proc/{orphan}/stat").read_text().rsplit(") ", 1)[1].split()[1])
            if parent == 1:  # adopted by init (no subreaper between this test and init)
                assert orphan in found
        assert watched.pid not in found
        assert not processes.find_orphans_in([tmp_path / "elsewhere"])
        (identity,) = [i for i in processes.find_orphans_in([tmp_path / "worktrees"]) if i.pid == orphan] or [
            processes.identity(orphan)]
        assert processes.kill(identity) == "dead"
    finally:
        watched.kill()
        watched.wait()
        try:
            os.kill(orphan, 9)
        except OSError:
            pass
