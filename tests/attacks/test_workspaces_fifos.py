"""Attack: an agent puts FIFOs where the capture opens files, and names files outside its workspace for it to read.

The capture opened what the workspace named with a plain open(): a FIFO as a folder's ``.gitignore``, or as the
``core.excludesFile`` the workspace's own git config names, hung `docket go` forever (deaf to SIGTERM), and its
resume too; an excludes file naming ``~/.ssh/id_rsa`` or ``/dev/zero`` was read by docket's own process. Now every
file of a workspace is opened without following symlinks and without blocking, and read only when it is a regular
file (adapters/world/files/regular_files.py), and ignore rules come from the workspace's own files and the user's own
configuration only, never from a path the workspace's config names. Each attacking task ends with a recorded result,
the run finishes, and the honest task lands.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.attacks.attacker_world import attacker_world, honest_and, results, task

TASKS = honest_and(
    task("fifo-gitignore", "a FIFO as .gitignore", "Block on the ignore file.", "write ignored.py: IGNORED = 1",
         "FIFO-GITIGNORE"),
    task("fifo-excludes", "core.excludesFile names a FIFO", "Block on the excludes file.",
         "write excluded.py: EXCLUDED = 1", "FIFO-EXCLUDES"),
    task("outside", "core.excludesFile names a file outside", "Make docket read a file outside.",
         "write outside.py: OUTSIDE = 1", "OUTSIDE-EXCLUDES"))


def _within(world, seconds: float, *args: str) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    """docket args, in a session of its own: killed whole (with what it started) if it takes longer than seconds, so a
    hang fails the test instead of holding it (a killed docket's children would keep its output pipes open)."""
    process = subprocess.Popen(world.argv(*args), cwd=world.repo, env=world.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"docket {' '.join(args[:2])} still ran after {seconds} s: it hangs")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_fifos_and_outside_files_named_by_a_workspace_are_never_read_and_the_run_finishes(tmp_path: Path):
    outside = tmp_path / "outside-secret"
    outside.write_text("outside.py\n")  # read as ignore rules, it would leave outside.py out of the candidate
    world = attacker_world(tmp_path, TASKS, outside=outside)

    done = _within(world, 90, "go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--json", "--parallel", "4",
                   "--cycles", "1")
    assert done.returncode == 0, done.stderr
    assert results(done) == {"greet": "delivered", "fifo-gitignore": "delivered", "fifo-excludes": "delivered",
                             "outside": "delivered"}
    assert world.file_at("main", "greet.py") == 'print("hello")\n'
    assert world.file_at("main", "sub/kept.py") == "KEPT = 1\n"  # the FIFO .gitignore counts as none
    assert world.file_at("main", "excluded.py") == "EXCLUDED = 1\n"
    assert world.file_at("main", "outside.py") == "OUTSIDE = 1\n"  # the outside file was never read as rules
    for command in (("go", "--resume", "r1", "--json"), ("reconcile", "--apply"), ("verify",)):
        again = _within(world, 90, *command)
        assert again.returncode == 0, (command, again.stderr)


def test_a_fifo_or_a_device_is_never_opened_as_a_workspace_file(tmp_path: Path):
    """What the capture reads (a file it listed, an ignore file, a large file hashed in chunks) is opened by
    open_regular: a FIFO swapped in after the listing is refused at once, never waited on."""
    fifo = tmp_path / "swapped.py"
    os.mkfifo(fifo)

    def hung(*_: object) -> None:
        raise TimeoutError("a FIFO was opened and waited on")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        _never_blocks(tmp_path, fifo)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _never_blocks(tmp_path: Path, fifo: Path) -> None:
    from docket.adapters.world.files.regular_files import NotRegular, open_regular
    from docket.adapters.world.git.size_limit import large_file_id

    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(NotRegular):
            open_regular(os.fsencode(path))
        with pytest.raises(NotRegular):
            large_file_id(os.fsencode(path), 1 << 30)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    with pytest.raises(OSError):
        open_regular(os.fsencode(link))
    regular = tmp_path / "a.py"
    regular.write_text("A = 1\n")
    fd = open_regular(os.fsencode(regular))
    try:
        assert os.read(fd, 100) == b"A = 1\n" and os.get_blocking(fd)
    finally:
        os.close(fd)
