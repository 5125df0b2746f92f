"""A symlink planted where docket makes one of its folders: nothing is written through it, the run stops with
`unsafe-path`, `docket reconcile` names it, and after `reconcile --apply` a `go --resume` delivers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.go_world import DELIVERED, GoWorld, make_go_world

ONE_TASK = '[[tasks]]\nid = "greet"\ntitle = "add the greeting"\nprompt = "write greet.py: print(1)"\n'


def _world(tmp_path: Path) -> tuple[GoWorld, Path]:
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    return world, keys


def _error_line(done) -> str:  # noqa: ANN001
    lines = [line for line in done.stderr.splitlines() if line.startswith("docket: error:")]
    assert lines, done.stderr
    return lines[-1]


def _data(world: GoWorld) -> Path:
    return Path(os.environ["XDG_DATA_HOME"]) / "docket"


def _plant(world: GoWorld, where: str, outside: Path) -> Path:
    """A symlink to outside at a folder docket makes: beside the ledger, or in the data folder."""
    from docket.adapters.world.files.paths import repository_key

    if where in ("receipts", "logs", "workers", "prompts", "checks", "integrations", "import-guard"):
        link = world.ledger.parent / where
    else:  # workspaces, executions: <data>/<where>/<repository key>
        link = _data(world) / where / repository_key(world.repo / ".git")
        link.parent.mkdir(parents=True, exist_ok=True)
    assert not os.path.lexists(link)
    link.symlink_to(outside, target_is_directory=True)
    return link


@pytest.mark.parametrize("where", ["receipts", "logs", "workers", "prompts", "checks", "integrations",
                                   "import-guard", "workspaces", "executions"])
def test_a_planted_symlink_is_never_written_through_and_reconcile_apply_lets_the_run_deliver(tmp_path: Path,
                                                                                             where: str):
    world, keys = _world(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = _plant(world, where, outside)

    stopped = world.go("r1", "--key", f"{keys}.key")
    assert stopped.returncode not in (0, 70), stopped.stderr
    assert list(outside.iterdir()) == []  # nothing written through the link
    assert "unsafe-path" in stopped.stderr + stopped.stdout, stopped.stderr
    assert os.path.islink(link)
    assert world.run("verify").returncode == 0

    report = world.json("reconcile")
    assert [(f["path"], f["applied"]) for f in report["folders"]] == [(str(link), None)]
    applied = world.json("reconcile", "--apply")
    assert [f["path"] for f in applied["folders"]] == [str(link)]
    aside = link.with_name(link.name + ".planted-1")
    assert os.path.islink(aside) and os.readlink(aside) == str(outside)  # moved aside, never deleted
    assert link.is_dir() and not link.is_symlink()
    assert world.json("reconcile")["folders"] == []

    # prompts are stored while the run is planned: a run stopped before its plan is planned again (as the refusal
    # of a bare resume says), every other run resumes
    resumed = world.go("r1", "--key", f"{keys}.key") if where == "prompts" else world.resume("r1")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["outcome"] == "delivered"
    assert world.file_at("main", "greet.py") == "print(1)\n"
    assert Path(summary["receipt"]["path"]).is_file()
    assert Path(summary["receipt"]["path"]).parent == world.ledger.parent / "receipts"
    assert list(outside.iterdir()) == []
    assert world.run("verify").returncode == 0


def test_a_symlinked_log_folder_of_one_worker_is_refused_and_honest_work_still_lands(tmp_path: Path):
    """The three-task world with a symlink planted at the log folder of one task's first worker."""
    world = make_go_world(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    logs = world.ledger.parent / "logs"
    logs.mkdir()
    link = logs / "r1.greet"
    link.symlink_to(outside, target_is_directory=True)
    stopped = world.go("r1", "--parallel", "3")
    assert stopped.returncode not in (0, 70), stopped.stderr
    assert list(outside.iterdir()) == []
    assert world.json("reconcile", "--apply")["folders"][0]["path"] == str(link)
    resumed = world.resume("r1")
    assert resumed.returncode == 0, resumed.stderr
    for path, text in DELIVERED.items():
        assert world.file_at("main", path) == text
    assert list(outside.iterdir()) == []


def test_a_symlinked_views_database_is_never_written_and_reconcile_apply_moves_it_aside(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    elsewhere = tmp_path / "elsewhere.sqlite"
    views = world.ledger.parent / "views.sqlite"
    views.unlink()
    views.symlink_to(elsewhere)
    assert not elsewhere.exists()
    assert world.json("reconcile")["folders"][0]["path"] == str(views)
    applied = world.json("reconcile", "--apply")["folders"]
    assert [(f["path"], f["kind"]) for f in applied] == [(str(views), "file")]
    assert os.path.islink(views.with_name("views.sqlite.planted-1"))
    done = world.go("r1")
    assert done.returncode == 0, done.stderr
    assert views.is_file() and not views.is_symlink() and not elsewhere.exists()
    assert world.file_at("main", "greet.py") == "print(1)\n"
