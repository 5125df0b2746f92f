"""`docket gc` lists the data a repository that is gone left in docket's data folder (its workspaces and
executions), and `--apply` removes it; a repository still there keeps every byte (issue 35, item 10).

Real repositories, real `docket go` runs making real workspaces and executions in the data folder, then one
repository deleted and one replaced by another at its path; gc runs in a third, living one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from docket.adapters.world.files.paths import executions_root, workspaces_root
from tests.conftest import make_repo
from tests.e2e.go_world import GoWorld, make_go_world

HOSTILE = "gone \x1b]0;owned\x07 é"  # a repository path is the user's, and may hold anything (but a newline:
# git's alternates, which a workspace borrows its objects through, are one path a line)


def folders(common: Path) -> list[Path]:
    return [workspaces_root(common), executions_root(common)]


def delivered(tmp_path: Path, name: str) -> GoWorld:
    world = make_go_world(tmp_path, name=name)
    done = world.go("r1", "--cycles", "2")
    assert done.returncode == 0, done.stderr
    return world


def data_items(listed: dict) -> list[tuple[str, str, str]]:
    return sorted((i["name"], i["path"], i["action"]) for i in listed["items"] if i["kind"] == "repository-data")


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry below folder: a file's bytes, a symlink's target, a folder's name."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        out[rel] = (os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else "folder")
    return out


def test_gc_lists_the_data_of_repositories_that_are_gone_and_apply_removes_only_that(tmp_path: Path,
                                                                                      data_dir: Path):
    gone, replaced, here = (delivered(tmp_path, name) for name in (HOSTILE, "replaced", "here"))
    gone_folders, replaced_folders = folders(gone.repo / ".git"), folders(replaced.repo / ".git")
    here_folders = folders(here.repo / ".git")
    assert all(f.is_dir() for f in gone_folders + replaced_folders + here_folders)
    assert list(workspaces_root(gone.repo / ".git").glob("r1/*/.git"))  # real workspaces, and executions
    assert [i for i in here.json("gc", "--apply")["items"] if i["action"] == "removed"]  # here's own, settled first
    here_before = {str(f): snapshot(f) for f in here_folders}
    # a symlink inside the gone repository's data, to something of the user's outside it: never followed
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "precious.txt").write_text("the user's\n")
    (gone_folders[0] / "r1" / "link").symlink_to(outside / "keep", target_is_directory=True)
    (gone_folders[0] / "r1" / "r1.greet" / "\nodd \x1b[31mname").write_text("an agent's\n")
    shutil.rmtree(gone.repo)  # deleted by its user
    shutil.rmtree(replaced.repo)  # and another repository made at the same path: not the one the data is of
    make_repo(replaced.repo)

    listed = here.json("gc")
    gone_key, replaced_key = gone_folders[0].name, replaced_folders[0].name
    assert data_items(listed) == sorted([*((gone_key, str(f), "remove") for f in gone_folders),
                                         *((replaced_key, str(f), "remove") for f in replaced_folders)]), listed
    reasons = {i["path"]: i["reason"] for i in listed["items"] if i["kind"] == "repository-data"}
    assert f"{gone.repo} no longer exists" in reasons[str(gone_folders[0])]
    assert "now holds a repository without a docket identity" in reasons[str(replaced_folders[0])]
    assert all(f.is_dir() for f in gone_folders + replaced_folders)  # listed only
    human = here.run("gc")
    assert human.returncode == 0 and f"remove  repository-data {gone_key}: " in human.stdout, human.stdout
    assert "\x1b" not in human.stdout and "\x07" not in human.stdout and "\\x1b]0;owned\\x07" in human.stdout

    applied = here.json("gc", "--apply")
    assert [(n, p) for n, p, a in data_items(applied) if a == "removed"] == \
        [(n, p) for n, p, _ in data_items(listed)], applied
    assert not any(f.exists() or f.is_symlink() for f in gone_folders + replaced_folders)
    assert (outside / "keep" / "precious.txt").read_text() == "the user's\n"  # the symlink went, not its target
    assert {str(f): snapshot(f) for f in here_folders} == here_before  # the living repository's: untouched
    assert data_items(here.json("gc", "--apply")) == []


def test_gc_in_another_repository_keeps_the_data_of_one_that_is_still_there(tmp_path: Path):
    there, here = delivered(tmp_path, "there"), delivered(tmp_path, "here")
    before = {str(f): snapshot(f) for f in folders(there.repo / ".git")}
    for listed in (here.json("gc"), here.json("gc", "--apply")):
        assert data_items(listed) == [], listed
    assert {str(f): snapshot(f) for f in folders(there.repo / ".git")} == before
    # moved away: its data is listed then (its repository is not at its path), and kept while listed only
    moved = tmp_path / "moved"
    there.repo.rename(moved)
    assert [a for _, _, a in data_items(here.json("gc"))] == ["remove", "remove"]
    moved.rename(there.repo)  # back: nothing is removed
    assert data_items(here.json("gc", "--apply")) == []
    assert {str(f): snapshot(f) for f in folders(there.repo / ".git")} == before
