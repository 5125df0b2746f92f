"""The process tree (process_tree.py) and the orphan scan of a resume (PsutilProcesses.find_orphans_in), on real
processes: an orphan working where docket launches is found; a process there with a living parent never is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from docket.adapters.world.processes.lifecycle import PsutilProcesses

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


def test_a_daemon_another_subreaper_adopted_is_found_but_a_child_of_a_living_session_is_not(tmp_path):
    """After a crash, the daemons a launch left go to the nearest subreaper, which is not always init (a
    supervisor, a container's init, a test runner that once became one): a process that left its session, whose
    leader is gone, is found whoever adopted it; a plain child in its parent's session (a user's shell's) is not."""
    import signal
    import subprocess
    import sys

    from docket.adapters.world.processes.process_tree import adopted_by_init_in

    folder = tmp_path / "workspace"
    folder.mkdir()
    wrapper = r'''
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
os.chdir(sys.argv[1])
child = subprocess.Popen(["sleep", "60"])  # in the wrapper's session: like a user's shell's child
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "60"])
    os._exit(0)
os.wait()
print(child.pid, flush=True)
time.sleep(60)
'''
    process = subprocess.Popen([sys.executable, "-c", wrapper, str(folder)], stdout=subprocess.PIPE, text=True)
    plain = None
    try:
        plain = int(process.stdout.readline())
        deadline = time.monotonic() + 10
        found: list[int] = []
        while not found and time.monotonic() < deadline:
            found = adopted_by_init_in([folder])
            time.sleep(0.05)
        assert len(found) == 1 and found[0] != plain
        assert Path(f"/proc/{found[0]}/cmdline").read_bytes().startswith(b"sleep")
        os.kill(found[0], signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
        if plain is not None:
            try:
                os.kill(plain, signal.SIGKILL)
            except ProcessLookupError:
                pass
