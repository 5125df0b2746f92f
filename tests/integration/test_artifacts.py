"""Artifact copy-back: only regular files replaced, hash-checked, never through a symlink, never outside the root."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from docket.adapters.world.workspaces.artifacts import check_artifact_path, copy_artifacts
from docket.domain.binding import CopiedArtifact
from docket.domain.kernel.errors import Refused

ARTIFACTS = "out"


@pytest.fixture
def sides(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(execution root, destination root, a folder outside both that must never be written)."""
    execution, destination, outside = tmp_path / "execution", tmp_path / "task", tmp_path / "outside"
    for folder in (execution, destination, outside):
        folder.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return execution, destination, outside


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str]]:
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_file():
                found[rel] = ("file", path.read_bytes())
            else:
                found[rel] = ("dir", b"")
    return found


def write(root: Path, rel: str, data: bytes = b"report\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def refused(code: str, execution: Path, destination: Path, artifact_dir: str = ARTIFACTS) -> None:
    before = snapshot(destination.parent)
    with pytest.raises(Refused) as caught:
        copy_artifacts(execution, artifact_dir, destination)
    assert caught.value.code == code, caught.value
    assert snapshot(destination.parent) == before  # nothing written anywhere, inside the root or out


def test_files_are_copied_with_their_digests(sides) -> None:
    execution, destination, _ = sides
    write(execution, "out/report.xml", b"<ok/>\n")
    write(execution, "out/deep/er/log.txt", b"lines\n")
    (execution / "out" / "deep" / "run.sh").write_text("#!/bin/sh\n")
    (execution / "out" / "deep" / "run.sh").chmod(0o755)
    write(execution, "src/not-an-artifact.py", b"x\n")
    copied = copy_artifacts(execution, ARTIFACTS, destination)
    assert copied == [
        CopiedArtifact("deep/er/log.txt", hashlib.sha256(b"lines\n").hexdigest(), 6),
        CopiedArtifact("deep/run.sh", hashlib.sha256(b"#!/bin/sh\n").hexdigest(), 10),
        CopiedArtifact("report.xml", hashlib.sha256(b"<ok/>\n").hexdigest(), 6),
    ]
    assert (destination / "out" / "report.xml").read_bytes() == b"<ok/>\n"
    assert (destination / "out" / "deep" / "run.sh").stat().st_mode & 0o100
    assert not (destination / "src").exists()
    assert sorted(p.name for p in (destination / "out").iterdir()) == ["deep", "report.xml"]  # no drafts left


def test_files_the_candidate_tracks_are_not_copied(sides) -> None:
    execution, destination, _ = sides
    write(execution, "out/keep.txt", b"tracked\n")
    write(execution, "out/report.xml")
    write(destination, "out/keep.txt", b"changed in the task since the pin\n")
    assert [c.path for c in copy_artifacts(execution, ARTIFACTS, destination, tracked={"keep.txt"})] == ["report.xml"]
    assert (destination / "out" / "keep.txt").read_bytes() == b"changed in the task since the pin\n"


def test_copying_again_is_fine_and_changes_nothing(sides) -> None:
    execution, destination, _ = sides
    write(execution, "out/report.xml")
    first = copy_artifacts(execution, ARTIFACTS, destination)
    before = snapshot(destination)
    assert copy_artifacts(execution, ARTIFACTS, destination) == first
    assert snapshot(destination) == before


def test_no_artifact_folder_copies_nothing(sides) -> None:
    execution, destination, _ = sides
    assert copy_artifacts(execution, ARTIFACTS, destination) == []
    assert snapshot(destination) == {}


def test_an_earlier_check_runs_file_is_replaced_by_the_new_one(sides) -> None:
    # the artifact folder is check output: the next cycle's report replaces the last one's (issue 35 item 7)
    execution, destination, _ = sides
    write(execution, "out/junit.xml", b"<testsuite failures='0'/>\n")
    write(destination, "out/junit.xml", b"<testsuite failures='1'/>\n")
    copied = copy_artifacts(execution, ARTIFACTS, destination)
    assert [c.path for c in copied] == ["junit.xml"]
    assert (destination / "out" / "junit.xml").read_bytes() == b"<testsuite failures='0'/>\n"
    assert sorted(p.name for p in (destination / "out").iterdir()) == ["junit.xml"]  # no drafts left


def test_a_folder_where_an_artifact_file_goes_is_a_conflict_and_nothing_is_written(sides) -> None:
    execution, destination, _ = sides
    write(execution, "out/a.txt")
    write(execution, "out/b.txt")
    write(destination, "out/b.txt/inside.txt", b"a folder in the way\n")
    refused("artifact-conflict", execution, destination)
    assert not (destination / "out" / "a.txt").exists()


def test_a_symlink_planted_by_the_check_pointing_outside_is_refused(sides) -> None:
    execution, destination, outside = sides
    write(execution, "out/a.txt")
    os.symlink(outside / "secret.txt", execution / "out" / "leak.txt")
    refused("artifact-symlink", execution, destination)


def test_a_symlinked_folder_among_the_artifacts_is_refused(sides) -> None:
    execution, destination, outside = sides
    (execution / "out").mkdir()
    os.symlink(outside, execution / "out" / "sub")
    refused("artifact-symlink", execution, destination)


def test_a_symlinked_artifact_folder_on_the_check_side_is_refused(sides) -> None:
    execution, destination, outside = sides
    os.symlink(outside, execution / "out")
    refused("artifact-symlink", execution, destination)


def test_a_symlinked_folder_on_the_destination_side_is_never_written_through(sides) -> None:
    execution, destination, outside = sides
    write(execution, "out/secret.txt", b"overwritten?\n")
    write(execution, "out/new.txt")
    os.symlink(outside, destination / "out")
    refused("artifact-symlink", execution, destination)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_a_symlinked_deeper_folder_on_the_destination_side_is_never_written_through(sides) -> None:
    execution, destination, outside = sides
    write(execution, "out/deep/new.txt")
    (destination / "out").mkdir()
    os.symlink(outside, destination / "out" / "deep")
    refused("artifact-symlink", execution, destination)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_symlink_at_the_destination_file_is_never_followed(sides) -> None:
    execution, destination, outside = sides
    write(execution, "out/secret.txt", b"overwritten?\n")
    (destination / "out").mkdir()
    os.symlink(outside / "secret.txt", destination / "out" / "secret.txt")
    refused("artifact-symlink", execution, destination)
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_symlinked_roots_are_refused(sides, tmp_path: Path) -> None:
    execution, destination, outside = sides
    write(execution, "out/a.txt")
    os.symlink(outside, tmp_path / "linked-task")
    with pytest.raises(Refused) as caught:
        copy_artifacts(execution, ARTIFACTS, tmp_path / "linked-task")
    assert caught.value.code == "artifact-symlink"
    os.symlink(execution, tmp_path / "linked-execution")
    with pytest.raises(Refused) as caught:
        copy_artifacts(tmp_path / "linked-execution", ARTIFACTS, destination)
    assert caught.value.code == "artifact-symlink"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize("artifact_dir", ["../outside", "out/../../outside", "/tmp", "", ".", "out/./x", "a//b"])
def test_an_artifact_folder_that_could_escape_is_refused(sides, artifact_dir: str) -> None:
    execution, destination, _ = sides
    write(execution.parent, "outside/x.txt")
    refused("artifact-escape", execution, destination, artifact_dir)


@pytest.mark.parametrize("rel", ["..", "../x", "a/../../x", "a/..", "/abs", "a\0b", ""])
def test_paths_with_dot_dot_parts_are_refused(rel: str) -> None:
    with pytest.raises(Refused) as caught:
        check_artifact_path(rel)
    assert caught.value.code == "artifact-escape"


def test_a_name_that_only_starts_with_dots_is_a_plain_file(sides) -> None:
    execution, destination, _ = sides
    write(execution, "out/..hidden")
    write(execution, "out/...")
    assert [c.path for c in copy_artifacts(execution, ARTIFACTS, destination)] == ["...", "..hidden"]
    assert (destination / "out" / "...").is_file()


def test_a_fifo_is_refused(sides) -> None:
    execution, destination, _ = sides
    (execution / "out").mkdir()
    os.mkfifo(execution / "out" / "pipe")
    refused("artifact-not-a-file", execution, destination)


def test_a_crafted_tree_with_dot_dot_entries_is_never_checked_out(repo: Path, tmp_path: Path) -> None:
    """A commit whose tree names '..' under the artifact folder is refused whole: nothing is written anywhere."""
    from docket.adapters.world.workspaces.executions import create_execution, execution_path

    def run(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(["git", *args], cwd=repo, input=stdin, check=True, capture_output=True,
                              text=True).stdout.strip()

    blob = run("hash-object", "-w", "--stdin", stdin="escaped\n")
    evil = run("mktree", stdin=f"100644 blob {blob}\tescaped.txt\n")
    dots = run("mktree", "--missing", stdin=f"040000 tree {evil}\t..\n100644 blob {blob}\tok.txt\n")
    root = run("mktree", stdin=f"040000 tree {dots}\tout\n")
    commit = run("commit-tree", root, "-m", "crafted")
    common = repo / ".git"
    path = execution_path(common, "run-1", "b" * 64, "tests", 1)
    with pytest.raises(Refused) as caught:
        create_execution(common, path, commit)
    assert caught.value.code == "execution-unsafe-tree"
    assert not path.parent.exists() or not list(path.parent.iterdir())  # refused before, or the half-made undone
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not (common / "worktrees").exists() or not list((common / "worktrees").iterdir())
