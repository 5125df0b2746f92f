"""Processes opening a new views file at once (twelve `docket init` on a fresh repository, say) all get it: SQLite
answers the race on switching it to WAL with an immediate "database is locked", which connect_views asks again."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path


def _open_at(args: tuple[str, float]) -> str:
    path, start = args
    while time.time() < start:  # all at once
        pass
    from docket.projections.views import connect_views

    try:
        connect_views(path, 10.0).conn.close()
    except Exception as e:  # noqa: BLE001  (what a process met is the test's evidence)
        return f"{type(e).__name__}: {e}"
    return "ok"


def test_sixteen_processes_opening_a_new_views_file_at_once_all_get_it(tmp_path: Path):
    context = multiprocessing.get_context("fork")
    with context.Pool(16) as pool:
        for round_ in range(12):
            path = str(tmp_path / f"views{round_}.sqlite")
            start = time.time() + 0.5
            results = pool.map(_open_at, [(path, start)] * 16)
            assert results == ["ok"] * 16, f"round {round_}: {[r for r in results if r != 'ok'][:3]}"
