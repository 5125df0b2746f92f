"""The pool of executions (execution_pool.py) is cleared by `docket gc` and swept by `docket reconcile`: idle entries
go (all once no run is open, else those beyond the newest few the pool keeps), a placed one never; what a killed give
back left (a folder no idle record describes) is listed by reconcile and discarded by --apply."""

from __future__ import annotations

import os
from pathlib import Path

from docket.adapters.world.workspaces.execution_pool import KEEP_IDLE, POOL
from docket.adapters.world.workspaces.executions import (create_execution, execution_path, observe_execution,
                                              remove_execution)
from docket.adapters.world.files.paths import executions_root
from tests.conftest import Docket, git

BINDING = "0123456789abcdef" * 4


def _head(docket: Docket) -> str:
    return git(docket.cwd, "rev-parse", "HEAD")


def _executions(docket: Docket, count: int, first: int = 1) -> list[Path]:
    common, commit = docket.cwd / ".git", _head(docket)
    paths = [execution_path(common, "r-pool", BINDING, "tests", n) for n in range(first, first + count)]
    for path in paths:
        create_execution(common, path, commit)
        assert observe_execution(common, path, commit).state == "ready"
    return paths


def _idle(pool: Path) -> list[str]:
    return sorted(p.name for p in pool.iterdir() if p.is_dir())


def test_gc_removes_every_idle_execution_once_no_run_is_open_and_never_a_placed_one(docket: Docket) -> None:
    docket("init")
    common = docket.cwd / ".git"
    pool = executions_root(common) / POOL
    given_back = _executions(docket, 3)
    placed = _executions(docket, 1, first=10)[0]
    for path in given_back:
        remove_execution(common, path, group_alive=False)
    idle = [name for name in _idle(pool) if not os.path.samefile(pool / name, placed)]
    assert len(idle) == 3

    listed = [i for i in docket("gc", "--json").json()["items"] if i["kind"] == "execution"]
    assert sorted((Path(i["path"]).name, i["action"]) for i in listed) == [(n, "remove") for n in idle]
    assert len(_idle(pool)) == 3  # listed only

    applied = [i for i in docket("gc", "--apply", "--json").json()["items"] if i["kind"] == "execution"]
    assert sorted((Path(i["path"]).name, i["action"]) for i in applied) == [(n, "removed") for n in idle]
    assert _idle(pool) == [] and not list(pool.glob("*.tmp"))
    assert observe_execution(common, placed, _head(docket)).state == "ready"  # the placed one is untouched
    remove_execution(common, placed, group_alive=False)
    again = _executions(docket, 1, first=20)[0]  # the pool still works
    assert observe_execution(common, again, _head(docket)).state == "ready"
    assert docket("verify").returncode == 0


def test_gc_keeps_the_newest_idle_executions_while_a_run_is_open(docket: Docket) -> None:
    from docket.adapters.world.workspaces import execution_return  # give_back keeps up to its KEEP_IDLE

    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    common = docket.cwd / ".git"
    pool = executions_root(common) / POOL
    many = KEEP_IDLE + 2
    execution_return.KEEP_IDLE = many  # a pool that kept more than it keeps now (an older docket's)
    try:
        paths = _executions(docket, many)
        for path in paths:
            remove_execution(common, path, group_alive=False)
    finally:
        execution_return.KEEP_IDLE = KEEP_IDLE
    assert len(_idle(pool)) == many
    oldest = sorted(_idle(pool), key=lambda n: os.lstat(pool / f"{n}.rec").st_mtime_ns)[:2]
    applied = [i for i in docket("gc", "--apply", "--json").json()["items"] if i["kind"] == "execution"]
    assert sorted(Path(i["path"]).name for i in applied) == sorted(oldest)
    assert all("r1" in i["reason"] for i in applied)
    assert len(_idle(pool)) == KEEP_IDLE


def test_reconcile_discards_what_a_killed_give_back_left_in_the_pool(docket: Docket) -> None:
    docket("init")
    common = docket.cwd / ".git"
    pool = executions_root(common) / POOL
    path = _executions(docket, 1)[0]
    remove_execution(common, path, group_alive=False)
    (idle,) = _idle(pool)
    os.unlink(pool / f"{idle}.rec")  # as a give back killed before it recorded the folder idle leaves it

    found = docket("reconcile", "--json").json()["git"]
    assert [(f["kind"], Path(f["path"]).name, f["applied"]) for f in found if f["kind"] == "pool-entry"] == [
        ("pool-entry", idle, None)]
    assert (pool / idle).is_dir()  # listed only
    text = docket("reconcile").stdout
    assert f"pool-entry: {pool / idle}" in text

    found = docket("reconcile", "--apply", "--json").json()["git"]
    assert [(Path(f["path"]).name, f["applied"]) for f in found if f["kind"] == "pool-entry"] == [
        (idle, "discarded")]
    assert _idle(pool) == []
    assert [f for f in docket("reconcile", "--json").json()["git"] if f["kind"] == "pool-entry"] == []
