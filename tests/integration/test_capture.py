"""Capture: the tree docket writes for a worktree equals what `git add -A` writes in a private index (artifact
directory aside), the shared index is never touched, and the stat cache spares unchanged files a re-read."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docket.adapters.world.git import capture as capture_module
from docket.adapters.world.git import worktree_walk
from docket.adapters.world.git.capture import CACHE_NAME, Capture, Unstable, capture, capture_twice
from docket.domain.kernel.errors import BadInput, Conflict, NotFound, Refused
from tests.conftest import git

ARTIFACTS = "artifacts"


def git_env(cwd: Path, index: Path, *args: str) -> str:
    env = {**os.environ, "GIT_INDEX_FILE": str(index), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def git_capture(worktree: Path, index: Path, artifact_dir: str | None = ARTIFACTS) -> str:
    """The tree real git writes: read-tree HEAD, add -A (untracked artifacts excluded), write-tree, private index."""
    index.unlink(missing_ok=True)
    git_env(worktree, index, "read-tree", "HEAD")
    if artifact_dir is None:
        git_env(worktree, index, "add", "-A")
    else:
        git_env(worktree, index, "add", "-A", "--", ".", f":(exclude){artifact_dir}")
        if git_env(worktree, index, "ls-files", "--", artifact_dir):
            git_env(worktree, index, "add", "-u", "--", artifact_dir)
    return git_env(worktree, index, "write-tree")


def git_changed(worktree: Path, base: str, tree: str) -> tuple[str, ...]:
    out = subprocess.run(["git", "-c", "core.quotePath=false", "diff-tree", "-r", "--name-only", "-z", base, tree],
                         cwd=worktree, check=True, capture_output=True).stdout
    return tuple(sorted(os.fsdecode(p) for p in out.split(b"\0") if p))


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose commit holds files, folders, a script, a symlink, ignore rules and a tracked artifact; the
    user's own git configuration names an excludes file (a repository's own core.excludesFile is the agent's to write
    in a workspace, and never read)."""
    path = tmp_path / "work"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("alpha\n")
    (path / "dir" / "sub").mkdir(parents=True)
    (path / "dir" / "b.txt").write_text("bravo\n")
    (path / "dir" / "sub" / "c.txt").write_text("charlie\n")
    (path / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (path / "script.sh").chmod(0o755)
    os.symlink("a.txt", path / "link")
    (path / ".gitignore").write_text("*.log\nbuild/\n")
    (path / ARTIFACTS).mkdir()
    (path / ARTIFACTS / "tracked.txt").write_text("kept\n")
    (path / "file-to-folder").write_text("a file for now\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "exclude").write_text("secret*\n")
    excludes = tmp_path / "global-excludes"
    excludes.write_text("*.swp\n")
    user_config = tmp_path / "user-gitconfig"
    user_config.write_text(f'[core]\n\texcludesFile = "{excludes}"\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user_config))
    return path


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD")


def modified(w: Path) -> None:
    (w / "a.txt").write_text("alpha, changed\n")


def deleted(w: Path) -> None:
    (w / "dir" / "b.txt").unlink()


def folder_deleted(w: Path) -> None:
    (w / "dir" / "sub" / "c.txt").unlink()
    (w / "dir" / "sub").rmdir()


def mode_changed(w: Path) -> None:
    (w / "a.txt").chmod(0o755)
    (w / "script.sh").chmod(0o644)


def symlink_new(w: Path) -> None:
    os.symlink("/etc/passwd", w / "outside-link")
    os.symlink("dir/b.txt", w / "dir-link")


def symlink_changed(w: Path) -> None:
    (w / "link").unlink()
    os.symlink("dir/b.txt", w / "link")


def symlink_replaces_file(w: Path) -> None:
    (w / "a.txt").unlink()
    os.symlink("script.sh", w / "a.txt")


def untracked(w: Path) -> None:
    (w / "new.txt").write_text("new\n")
    (w / "dir" / "sub" / "new.txt").write_text("new too\n")


def ignored(w: Path) -> None:
    (w / "debug.log").write_text("ignored by .gitignore\n")
    (w / "build").mkdir()
    (w / "build" / "out.o").write_text("ignored folder\n")
    (w / "secret.txt").write_text("ignored by info/exclude\n")
    (w / "notes.swp").write_text("ignored by core.excludesFile\n")
    (w / "dir" / ".gitignore").write_text("local-*\n")
    (w / "dir" / "local-1").write_text("ignored by a nested .gitignore\n")
    (w / "kept.txt").write_text("not ignored\n")


def tracked_file_ignored_now(w: Path) -> None:
    (w / ".gitignore").write_text("*.log\nbuild/\na.txt\ndir/\n")
    (w / "a.txt").write_text("tracked, so still captured\n")
    (w / "dir" / "b.txt").write_text("tracked under an ignored folder\n")
    (w / "dir" / "untracked.txt").write_text("untracked under an ignored folder\n")


def artifact_untracked(w: Path) -> None:
    (w / ARTIFACTS / "report.xml").write_text("<report/>\n")
    (w / ARTIFACTS / "deep" / "er").mkdir(parents=True)
    (w / ARTIFACTS / "deep" / "er" / "x.bin").write_bytes(b"\0\1\2")


def artifact_tracked(w: Path) -> None:
    (w / ARTIFACTS / "tracked.txt").write_text("kept, and changed\n")


def artifact_tracked_deleted(w: Path) -> None:
    (w / ARTIFACTS / "tracked.txt").unlink()


def nested(w: Path) -> None:
    (w / "one" / "two" / "three").mkdir(parents=True)
    (w / "one" / "two" / "three" / "four.txt").write_text("deep\n")
    (w / "dir" / "sub" / "more").mkdir()
    (w / "dir" / "sub" / "more" / "d.txt").write_text("delta\n")


def unicode_and_spaces(w: Path) -> None:
    (w / "é file.txt").write_text("accent and space\n")
    (w / "dir with space").mkdir()
    (w / "dir with space" / "ü ñ 日本.txt").write_text("unicode\n")


def empty(w: Path) -> None:
    (w / "empty").write_bytes(b"")
    (w / "a.txt").write_bytes(b"")


def file_to_folder(w: Path) -> None:
    (w / "file-to-folder").unlink()
    (w / "file-to-folder").mkdir()
    (w / "file-to-folder" / "inside.txt").write_text("now a folder\n")


def folder_to_file(w: Path) -> None:
    (w / "dir" / "sub" / "c.txt").unlink()
    (w / "dir" / "sub").rmdir()
    (w / "dir" / "sub").write_text("now a file\n")


def symlinked_folder(w: Path) -> None:
    os.symlink("dir", w / "dir-alias")
    os.symlink("/", w / "root-alias")


def nothing(w: Path) -> None:
    pass


CASES: list[Callable[[Path], None]] = [
    modified, deleted, folder_deleted, mode_changed, symlink_new, symlink_changed, symlink_replaces_file, untracked,
    ignored, tracked_file_ignored_now, artifact_untracked, artifact_tracked, artifact_tracked_deleted, nested,
    unicode_and_spaces, empty, file_to_folder, folder_to_file, symlinked_folder, nothing,
]


@pytest.mark.parametrize("change", CASES, ids=[c.__name__ for c in CASES])
def test_capture_writes_the_tree_git_add_all_writes_and_lists_the_changed_paths(work, tmp_path, change):
    base = head(work)
    change(work)

    got = capture_twice(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    assert isinstance(got, Capture)
    assert got.head == base
    assert got.tree == git_capture(work, tmp_path / "private-index")
    assert got.changed == git_changed(work, base, got.tree)
    assert (got.changed == ()) == (change in (nothing, artifact_untracked))
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=work, capture_output=True, text=True)
    assert fsck.returncode == 0 and fsck.stderr == "", fsck.stderr


def test_named_cases_change_what_they_say(work):
    base = head(work)
    for change, expected in [(ignored, ("dir/.gitignore", "kept.txt")), (artifact_untracked, ()),
                             (artifact_tracked, ("artifacts/tracked.txt",)),
                             (symlinked_folder, ("dir-alias", "root-alias"))]:
        change(work)
        got = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)
        assert set(expected) <= set(got.changed), change.__name__
    assert not any(p.startswith(("dir-alias/", "root-alias/", "build/", "artifacts/report")) for p in got.changed)
    tree = git(work, "ls-tree", got.tree, "dir-alias", "root-alias")
    assert tree.splitlines() == [line for line in tree.splitlines() if line.startswith("120000 blob")]


def test_without_an_artifact_dir_untracked_artifacts_are_captured(work, tmp_path):
    base = head(work)
    artifact_untracked(work)
    got = capture(work, expected_head=base, base=base, artifact_dir=None)
    assert got.tree == git_capture(work, tmp_path / "private-index", artifact_dir=None)
    assert "artifacts/report.xml" in got.changed


def test_changed_paths_are_against_base_when_the_agent_committed(work, tmp_path):
    base = head(work)
    (work / "committed.txt").write_text("the agent committed this\n")
    (work / "a.txt").write_text("and this\n")
    git(work, "add", "committed.txt", "a.txt")
    git(work, "commit", "-q", "-m", "agent work")
    agent_head = head(work)
    (work / "a.txt").write_text("alpha\n")  # back to the base content, uncommitted
    (work / "uncommitted.txt").write_text("not yet committed\n")

    got = capture_twice(work, expected_head=agent_head, base=base, artifact_dir=ARTIFACTS)

    assert got.head == agent_head
    assert got.tree == git_capture(work, tmp_path / "private-index")
    assert got.changed == ("committed.txt", "uncommitted.txt") == git_changed(work, base, got.tree)


def test_a_linked_worktree_is_captured_with_the_common_excludes_and_its_shared_index_untouched(work, tmp_path):
    linked = tmp_path / "linked"
    git(work, "worktree", "add", "-q", "-b", "task", str(linked))
    base = head(linked)
    ignored(linked)
    modified(linked)
    shared = work / ".git" / "worktrees" / "linked" / "index"
    before = (shared.read_bytes(), shared.stat().st_mtime_ns)

    got = capture_twice(linked, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    assert got.tree == git_capture(linked, tmp_path / "private-index")
    assert "secret.txt" not in got.changed and "a.txt" in got.changed
    assert (shared.read_bytes(), shared.stat().st_mtime_ns) == before
    assert (work / ".git" / "worktrees" / "linked" / CACHE_NAME).exists()


def test_the_shared_index_is_never_read_or_written(work, monkeypatch):
    base = head(work)
    modified(work)
    untracked(work)
    index = work / ".git" / "index"
    index.write_bytes(b"not an index at all")  # a capture that read it would fail; one that wrote it would change it
    os.utime(index, ns=(1_000_000_000, 1_000_000_000))
    before = (index.read_bytes(), index.stat().st_mtime_ns)

    got = capture_twice(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    assert isinstance(got, Capture) and got.changed == ("a.txt", "dir/sub/new.txt", "new.txt")
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before


def test_a_file_changed_between_the_two_captures_is_unstable(work):
    base = head(work)
    modified(work)

    got = capture_twice(work, expected_head=base, base=base, artifact_dir=ARTIFACTS,
                        between=lambda: (work / "dir" / "b.txt").write_text("changed between\n"))

    assert isinstance(got, Unstable)
    assert got.first.tree != got.second.tree
    assert got.first.changed == ("a.txt",) and got.second.changed == ("a.txt", "dir/b.txt")
    assert got.differing == ("dir/b.txt",)


def test_head_moved_and_unreadable_worktrees_raise_stable_codes(work, tmp_path):
    base = head(work)
    with pytest.raises(Conflict) as moved:
        capture(work, expected_head="0" * 40, base=base, artifact_dir=None)
    assert moved.value.code == "head-moved"
    (tmp_path / "plain").mkdir()
    for not_a_worktree in (tmp_path / "plain", work / "dir", tmp_path / "missing"):
        with pytest.raises(Refused) as unreadable:
            capture(not_a_worktree, expected_head=None, base=base, artifact_dir=None)
        assert unreadable.value.code == "worktree-unreadable"
    with pytest.raises(NotFound) as missing:
        capture(work, expected_head=None, base="1" * 40, artifact_dir=None)
    assert missing.value.code == "base-missing"
    with pytest.raises(BadInput) as bad:
        capture(work, expected_head=None, base=base, artifact_dir="../elsewhere")
    assert bad.value.code == "bad-artifact-dir"


def test_an_untracked_nested_repository_is_left_out(work):
    base = head(work)
    inner = work / "vendored"
    inner.mkdir()
    git(inner, "init", "-q", "-b", "main")
    (inner / "inside.txt").write_text("belongs to another repository\n")

    got = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    assert got.changed == ()  # git add -A would add a gitlink; docket leaves nested repositories out


def counting_reads(monkeypatch) -> list[bytes]:
    reads: list[bytes] = []
    real = worktree_walk._read_file
    monkeypatch.setattr(worktree_walk, "_read_file", lambda path: reads.append(path) or real(path))
    real_readlink = os.readlink
    monkeypatch.setattr(capture_module.os, "readlink", lambda path: reads.append(path) or real_readlink(path))
    return reads


def age(root: Path, seconds: int = 10) -> None:
    """Every file's mtime moved `seconds` into the past: none is racily clean when the cache is written."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            st = os.lstat(os.path.join(folder, name))
            os.utime(os.path.join(folder, name), ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9),
                     follow_symlinks=False)


def test_a_second_capture_of_an_unchanged_tree_reads_no_file(work, tmp_path, monkeypatch):
    for i in range(2000):
        folder = work / "many" / f"{i % 40:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"file {i}\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "many")
    base = head(work)
    modified(work)
    age(work)
    first = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)
    reads = counting_reads(monkeypatch)

    second = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    assert second == first and first.changed == ("a.txt",)
    assert reads == []
    assert first.tree == git_capture(work, tmp_path / "private-index")


def test_a_same_size_change_with_its_mtime_forced_back_is_caught_and_a_racy_entry_is_hashed_again(
        work, tmp_path, monkeypatch):
    base = head(work)
    target = work / "dir" / "b.txt"
    age(work)
    first = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)
    old = target.stat()
    target.write_text("BRAVO\n")  # the same size
    os.utime(target, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (old.st_size, old.st_mtime_ns)

    second = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    assert second.tree != first.tree and second.changed == ("dir/b.txt",)
    assert second.tree == git_capture(work, tmp_path / "private-index")

    # Racy: an entry whose mtime is not older than the cache file's is hashed again, even when its stat matches.
    cache = work / ".git" / CACHE_NAME
    reads = counting_reads(monkeypatch)
    assert capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS) == second
    assert reads == []
    os.utime(cache, ns=(old.st_mtime_ns, old.st_mtime_ns))
    assert capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS) == second
    assert os.fsencode(target) in reads


def test_a_damaged_cache_is_ignored(work, tmp_path):
    base = head(work)
    modified(work)
    first = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)
    cache = work / ".git" / CACHE_NAME
    data = bytearray(cache.read_bytes())
    data[40] ^= 0xFF
    cache.write_bytes(bytes(data))
    assert capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS) == first
    cache.write_bytes(b"")
    assert capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS) == first


def test_a_file_that_cannot_be_read_makes_the_worktree_unreadable(work, monkeypatch):
    base = head(work)
    modified(work)

    real = worktree_walk._read_file

    def denied(path: bytes) -> bytes:
        if path.endswith(b"/a.txt"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(worktree_walk, "_read_file", denied)
    with pytest.raises(Refused) as unreadable:
        capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)
    assert unreadable.value.code == "worktree-unreadable" and "a.txt" in unreadable.value.message


def test_a_failure_to_write_objects_propagates_as_an_io_error(work, monkeypatch):
    base = head(work)
    modified(work)

    def disk_full(store, data: bytes) -> bytes:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(worktree_walk, "_write_blob", disk_full)
    with pytest.raises(OSError) as failed:
        capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)
    assert failed.value.errno == 28


def test_changed_paths_are_quoted_as_git_quotes_them_so_none_drives_a_terminal(work):
    base = head(work)
    utf8_names = ["new\nline.txt", 'quo"te.txt', "back\\slash.txt", "tab\t.txt", "del\x7f.txt", "esc\x1b[31m.txt",
                  "ü plain.txt"]
    for name in utf8_names:
        (work / name).write_text("x\n")
    os.close(os.open(os.path.join(os.fsencode(work), b"\xff\xfe.bin"), os.O_CREAT | os.O_WRONLY, 0o644))

    got = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    def listed(quote_path: str) -> list[bytes]:
        return subprocess.run(["git", "-c", f"core.quotePath={quote_path}", "diff-tree", "-r", "--name-only", base,
                               got.tree], cwd=work, check=True, capture_output=True).stdout.splitlines()

    as_git_prints_utf8 = {line.decode() for line in listed("false") if b"\xff" not in line}
    as_git_escapes_bytes = {line.decode("ascii") for line in listed("true") if line.startswith(b'"\\377')}
    assert set(got.changed) == as_git_prints_utf8 | as_git_escapes_bytes
    assert as_git_escapes_bytes == {'"\\377\\376.bin"'}
    assert "ü plain.txt" in got.changed and '"esc\\033[31m.txt"' in got.changed
    assert not any(ch in "".join(got.changed) for ch in "\n\t\x1b\x7f")


def test_a_test_runs_caches_are_ignored_exactly_as_git_ignores_them(work, tmp_path):
    """pytest writes .pytest_cache/ with a .gitignore of '*' inside it (which ignores itself too): git leaves it out,
    and so does the capture; bytecode nobody ignores is captured by both."""
    base = head(work)
    (work / ".pytest_cache" / "v" / "cache").mkdir(parents=True)
    (work / ".pytest_cache" / ".gitignore").write_text("# Created by pytest automatically.\n*\n")
    (work / ".pytest_cache" / "v" / "cache" / "nodeids").write_text("[]\n")
    (work / "dir" / "__pycache__").mkdir()
    (work / "dir" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"\0")
    got = capture(work, expected_head=base, base=base, artifact_dir=ARTIFACTS)
    assert got.tree == git_capture(work, tmp_path / "private-index")
    assert not any(p.startswith(".pytest_cache") for p in got.changed)
    assert "dir/__pycache__/b.cpython-311.pyc" in got.changed


_PATTERNS = ["*", "*.log", "build/", "!keep.log", "/top.txt", "sub/", "**/deep", "a*", "!a1.txt", "*.txt", "b/",
             "sub/*.log", "!sub/", "#x", "\\#y"]
_FILES = ["top.txt", "a1.txt", "x.log", "keep.log", "sub/a2.txt", "sub/x.log", "sub/deep/z.txt", "build/o.txt",
          "b/keep.log", "b/sub/q.txt", "deep/w.log", "#y"]


@given(ignores=st.dictionaries(st.sampled_from(["", "sub/", "b/", "sub/deep/"]),
                               st.lists(st.sampled_from(_PATTERNS), max_size=4), max_size=3),
       files=st.sets(st.sampled_from(_FILES), min_size=1), exclude=st.lists(st.sampled_from(_PATTERNS), max_size=2))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_what_is_ignored_is_exactly_what_git_ignores(tmp_path, ignores, files, exclude):
    import shutil
    import uuid

    root = tmp_path / uuid.uuid4().hex
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "seed").write_text("seed\n")
    git_env(root, root / ".git" / "index", "add", "seed")
    git_env(root, root / ".git" / "index", "commit", "-q", "-m", "seed")
    base = git(root, "rev-parse", "HEAD")
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel + "\n")
    for folder, patterns in ignores.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / ".gitignore").write_text("".join(p + "\n" for p in patterns))
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("".join(p + "\n" for p in exclude))
    try:
        got = capture(root, expected_head=base, base=base, artifact_dir=None)
        assert got.tree == git_capture(root, tmp_path / f"{root.name}.index", artifact_dir=None), (ignores, files)
    finally:
        shutil.rmtree(root)
