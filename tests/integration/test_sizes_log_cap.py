"""log_cap: a log over its cap keeps its head and its tail with a marker line saying how much was cut, and goes
on from its new end for a writer that appends (as docket opens every log)."""

from __future__ import annotations

import os
from pathlib import Path

from docket.adapters.world.files.log_cap import MARKER_BYTES, cap_log, cut_so_far, marker
from docket.adapters.world.files.logs import log_summary

CAP = 10_000


def _appending(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def test_a_log_under_its_cap_is_left_whole(tmp_path: Path):
    log = tmp_path / "log"
    log.write_bytes(b"a" * CAP)
    assert cap_log(log, CAP) == 0 and log.read_bytes() == b"a" * CAP and cut_so_far(log) == 0


def test_a_log_over_its_cap_keeps_head_and_tail_and_says_how_much_was_cut(tmp_path: Path):
    log = tmp_path / "log"
    head, middle, tail = b"H" * CAP, b"m" * 50_000, b"T" * CAP
    log.write_bytes(head + middle + tail)
    cut = cap_log(log, CAP)
    data = log.read_bytes()
    assert len(data) == CAP and cut == len(head + middle + tail) - CAP + MARKER_BYTES
    assert data.startswith(b"H" * (CAP // 2)) and data.endswith(b"T" * (CAP - CAP // 2 - MARKER_BYTES))
    assert marker(cut) in data and f"{cut} bytes of output cut".encode() in data
    assert cut_so_far(log) == cut and log_summary(log).cut == cut


def test_an_appending_writer_goes_on_at_the_new_end_and_the_count_adds_up(tmp_path: Path):
    log = tmp_path / "log"
    fd = _appending(log)
    written = 0
    try:
        for round_ in range(5):
            chunk = bytes([65 + round_]) * (3 * CAP)
            os.write(fd, chunk)
            written += len(chunk)
            cap_log(log, CAP)
        os.write(fd, b"the last line\n")
        written += len(b"the last line\n")
    finally:
        os.close(fd)
    cut = cap_log(log, CAP)
    data = log.read_bytes()
    assert len(data) <= CAP and data.endswith(b"the last line\n") and data.startswith(b"A" * (CAP // 2))
    assert cut == written - len(data) + MARKER_BYTES  # every byte is kept or counted (the marker replaced output)
    assert data.count(b"bytes of output cut here") == 1


def test_a_symlink_or_a_fifo_is_never_capped(tmp_path: Path):
    target = tmp_path / "target"
    target.write_bytes(b"x" * 3 * CAP)
    (tmp_path / "link").symlink_to(target)
    assert cap_log(tmp_path / "link", CAP) == 0 and target.stat().st_size == 3 * CAP
    os.mkfifo(tmp_path / "fifo")
    assert cap_log(tmp_path / "fifo", CAP) == 0


def test_a_checks_or_hooks_flood_is_capped_while_it_runs_and_when_it_ends(tmp_path: Path):
    """wait_for_group (checks and hooks) keeps the log of what it waits for under max_log, with the same marker."""
    from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses, wait_for_group

    log = tmp_path / "log"
    script = "echo FIRST; yes | head -c 30000000; echo LAST"
    spec = LaunchSpec(argv=("/bin/sh", "-c", script), cwd=tmp_path, env={"PATH": os.environ["PATH"]}, log_path=log)
    processes = PsutilProcesses()
    gated = processes.spawn_gated(spec)
    gated.open()
    code, cause = wait_for_group(processes, gated, timeout_ms=120_000, log_path=log, max_log=CAP)
    assert (code, cause) == (0, None)
    data = log.read_bytes()
    assert len(data) <= CAP and data.startswith(b"FIRST\ny\n") and data.endswith(b"y\nLAST\n")
    # every byte is kept or counted, but for what a flood wrote in the instant of a cut while it ran (log_cap.py)
    assert 29_000_000 < cut_so_far(log) <= 6 + 30_000_000 + 5 - len(data) + MARKER_BYTES


def test_a_flood_that_ends_over_the_cap_but_under_its_slack_is_cut_while_the_process_still_runs(tmp_path: Path):
    """The cut during a flood waits for a quarter over the cap; a flood that stops in that quarter (between two
    cuts) is cut as soon as the log is quiet, not left over its cap until the process ends. The process waits for a
    file that stop() makes once it sees the log capped, so only a log left over its cap lets it reach its timeout."""
    from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses, wait_for_group

    log = tmp_path / "log"
    script = f"echo FIRST; yes | head -c {CAP + CAP // 8}; while [ ! -e go ]; do sleep 0.05; done; echo LAST"
    spec = LaunchSpec(argv=("/bin/sh", "-c", script), cwd=tmp_path, env={"PATH": os.environ["PATH"]}, log_path=log)
    processes = PsutilProcesses()
    gated = processes.spawn_gated(spec)
    gated.open()
    seen_while_running: list[int] = []

    def capped_while_it_runs() -> bool:
        if not seen_while_running and b"bytes of output cut here" in log.read_bytes():
            seen_while_running.append(log.stat().st_size)
            (tmp_path / "go").write_text("")
        return False

    code, cause = wait_for_group(processes, gated, timeout_ms=60_000, log_path=log, max_log=CAP,
                                 stop=capped_while_it_runs)
    assert (code, cause) == (0, None)
    assert seen_while_running and seen_while_running[0] <= CAP
    assert log.read_bytes().endswith(b"y\nLAST\n")


def test_a_cut_is_due_in_a_flood_a_quarter_over_the_cap_and_when_quiet_just_over_it():
    from docket.adapters.world.files.log_cap import cut_due

    assert not cut_due(CAP + CAP // 4, CAP, quiet=False) and cut_due(CAP + CAP // 4 + 1, CAP, quiet=False)
    assert not cut_due(CAP, CAP, quiet=True) and cut_due(CAP + 1, CAP, quiet=True)
    # a max_log too small for a head, the marker and a tail is raised as cap_log raises it: no cut that cuts nothing
    least = 4 * MARKER_BYTES
    assert not cut_due(least, 1, quiet=True) and cut_due(least + 1, 1, quiet=True)


def _flood_lost(log: Path, cap: int, total: int) -> tuple[int, int]:
    """(bytes neither kept nor counted as cut, cuts) after a fast writer floods log while it is capped."""
    import subprocess

    fd = _appending(log)
    try:
        flood = subprocess.Popen(["sh", "-c", f"yes 'chatter chatter chatter' | head -c {total}"], stdout=fd)
    finally:
        os.close(fd)
    cuts = 0
    while flood.poll() is None:
        if os.stat(log).st_size > cap * 5 // 4:
            cap_log(log, cap)
            cuts += 1
    cut = cap_log(log, cap)
    return total - (log.stat().st_size - MARKER_BYTES) - cut, cuts


def test_output_written_while_a_cut_copies_the_tail_is_kept_after_it(tmp_path: Path, monkeypatch):
    """The process writes while the cut copies its tail: what it wrote meanwhile is copied after the tail, not
    lost, and the count adds up to the byte. The write is made to land inside the copy, so no timing decides it;
    without catching up (_CATCH_UP = 0) the same write is lost, which the second half shows."""
    from docket.adapters.world.files import log_cap

    def cut_with_a_write_during_the_copy(log: Path, catch_up: int) -> tuple[bytes, int, int]:
        fd = _appending(log)
        os.write(fd, b"H" * CAP + b"m" * 50_000 + b"T" * CAP)
        written = CAP + 50_000 + CAP
        copy_down, landed = log_cap._copy_down, []

        def copy_then_write(*args):
            copy_down(*args)
            if not landed:  # the first copy is the tail's: the process writes right after it
                landed.append(os.write(fd, b"W" * 3_000))

        monkeypatch.setattr(log_cap, "_copy_down", copy_then_write)
        monkeypatch.setattr(log_cap, "_CATCH_UP", catch_up)
        try:
            cut = cap_log(log, CAP)
        finally:
            monkeypatch.undo()
            os.close(fd)
        return log.read_bytes(), cut, written + landed[0]

    data, cut, written = cut_with_a_write_during_the_copy(tmp_path / "log", log_cap._CATCH_UP)
    assert data.endswith(b"T" * 100 + b"W" * 3_000)
    assert cut == written - len(data) + MARKER_BYTES  # every byte is kept or counted
    data, cut, written = cut_with_a_write_during_the_copy(tmp_path / "without", 0)
    assert b"W" not in data and cut == written - len(data) + MARKER_BYTES - 3_000  # lost, uncounted


def test_a_flood_capped_while_it_runs_keeps_its_log_under_the_cap_and_counts_what_it_cut(tmp_path: Path):
    """A flood as fast as the disk takes it, capped over and over while it runs: the log ends under its cap and
    the count never claims more than was written (what landed in the instant of a truncate may go uncounted)."""
    cap, total = 1_000_000, 60_000_000
    lost, cuts = _flood_lost(tmp_path / "log", cap, total)
    assert cuts > 0 and 0 <= lost < total // 10
    assert (tmp_path / "log").stat().st_size <= cap
