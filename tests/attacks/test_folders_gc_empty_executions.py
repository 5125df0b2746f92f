"""A crash can leave an empty ``<data>/executions/<key>/<run>/<binding>/`` folder: `docket gc` lists it and
`--apply` removes it and its emptied run folder; anything not empty, or a symlink, stays."""

from __future__ import annotations

import os
from pathlib import Path

from docket.adapters.world.files.paths import executions_root
from tests.conftest import Docket


def test_gc_removes_empty_execution_folders_a_crash_left_and_keeps_the_rest(docket: Docket, tmp_path: Path):
    docket("init")
    root = executions_root(docket.cwd / ".git")
    empty = root / "r1" / "b1"
    empty.mkdir(parents=True)
    busy = root / "r2" / "b2" / "ok-1"
    busy.mkdir(parents=True)
    (busy / "f").write_text("kept\n")
    outside = tmp_path / "outside"
    (outside / "empty").mkdir(parents=True)
    (root / "r3").mkdir()
    (root / "r3" / "b3").symlink_to(outside / "empty", target_is_directory=True)

    listed = docket("gc", "--json").json()["items"]
    assert [(i["kind"], i["path"], i["action"]) for i in listed if i["kind"] == "folder"] == [
        ("folder", str(empty), "remove")]
    assert empty.is_dir()  # listed only

    applied = docket("gc", "--apply", "--json").json()["items"]
    assert [(i["path"], i["action"]) for i in applied if i["kind"] == "folder"] == [(str(empty), "removed")]
    assert not (root / "r1").exists()  # the run folder it emptied went too
    assert (busy / "f").read_text() == "kept\n"
    assert os.path.islink(root / "r3" / "b3") and (outside / "empty").is_dir()
    assert docket("verify").returncode == 0
