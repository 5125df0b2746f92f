"""Scanning the process table while another thread scans it (docket go supervises one agent per thread): each scan
reads the attributes it asked for, never those another scan put on psutil's shared Process objects.

psutil.process_iter yields the same cached Process objects to every caller and sets the attributes asked for on
them (`info`): a scan that reads `info` after another thread's scan replaced it finds keys missing. Found by a
thousand-task run at --parallel 8: the supervisor's orphan scan (uids, ppid) read `info` after another thread's
marked-process scan (uids) had replaced it, and docket go ended with KeyError: 'ppid' (exit 70). The interleaving
is made certain here: a tracer runs the other scan between the lines of the scan under test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import psutil

from docket.adapters.world.processes.process_tree import adopted_by_init_in
from docket.adapters.world.processes.lifecycle import PsutilProcesses

BUDGET = 40  # lines of the scan under test with another scan run before them


def _other_scan(attrs: list[str]) -> Callable[[], None]:
    def scan() -> None:
        for process in psutil.process_iter(attrs):
            process.info.get(attrs[0])
    return scan


def _with_another_scan_between_its_lines(code: Any, other: Callable[[], None], work: Callable[[], Any]) -> Any:
    left = [BUDGET]

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and left[0] > 0:
            left[0] -= 1
            other()  # tracing is off inside a tracer: the other scan runs untraced
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return local if event == "call" and frame.f_code is code else None

    sys.settrace(calls)
    try:
        return work()
    finally:
        sys.settrace(None)


def test_the_orphan_scan_reads_its_own_attributes(tmp_path):
    found = _with_another_scan_between_its_lines(adopted_by_init_in.__code__, _other_scan(["uids"]),
                                                 lambda: adopted_by_init_in([tmp_path]))
    assert found == []


def test_the_marked_scan_reads_its_own_attributes():
    found = _with_another_scan_between_its_lines(PsutilProcesses.find_marked.__code__, _other_scan(["ppid"]),
                                                 lambda: PsutilProcesses().find_marked("DOCKET_NO_SUCH_MARK", "x"))
    assert found == []
