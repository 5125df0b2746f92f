"""Capture's size limit: a file over max_file_size is refused (file-too-large) before any object of it is written,
unless the base already holds exactly that content at its path; large files are hashed without being read whole,
and a large loose blob is checked out by streaming (blobs.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from docket.adapters.world.git.blobs import file_blob_id, write_loose_blob
from docket.adapters.world.git.capture import capture, capture_twice
from docket.domain.kernel.codes import Code
from docket.domain.kernel.errors import Refused
from tests.conftest import git

LIMIT = 1000


def _objects(repo: Path) -> set[str]:
    out = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "small.txt").write_text("small\n")
    (path / "data.bin").write_bytes(b"d" * (LIMIT + 1))  # the user's own large file, on the base
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


def test_a_new_file_over_the_limit_is_refused_naming_it_and_no_object_of_it_is_written(work: Path):
    (work / "big.bin").write_bytes(b"x" * (LIMIT + 1))
    before = _objects(work)
    with pytest.raises(Refused) as caught:
        capture_twice(work, expected_head=None, base="HEAD", artifact_dir=None, max_file_size=LIMIT)
    assert caught.value.code == Code.FILE_TOO_LARGE
    assert "big.bin" in caught.value.message and str(LIMIT + 1) in caught.value.message
    assert _objects(work) == before


def test_a_file_at_the_limit_is_captured(work: Path):
    (work / "edge.bin").write_bytes(b"x" * LIMIT)
    captured = capture_twice(work, expected_head=None, base="HEAD", artifact_dir=None, max_file_size=LIMIT)
    assert captured.changed == ("edge.bin",)


def test_the_bases_own_large_file_is_captured_unchanged_even_when_hashed_again(work: Path):
    (work / "small.txt").write_text("changed\n")
    (work / ".git" / "docket-capture.index").unlink(missing_ok=True)  # no stat cache: every file is hashed
    captured = capture(work, expected_head=None, base="HEAD", artifact_dir=None, max_file_size=LIMIT)
    assert captured.changed == ("small.txt",)
    again = capture(work, expected_head=None, base="HEAD", artifact_dir=None, max_file_size=LIMIT)  # from the cache
    assert again.tree == captured.tree


def test_the_bases_large_file_changed_is_refused_and_so_is_one_moved_to_another_path(work: Path):
    (work / "data.bin").write_bytes(b"e" * (LIMIT + 1))
    with pytest.raises(Refused) as caught:
        capture(work, expected_head=None, base="HEAD", artifact_dir=None, max_file_size=LIMIT)
    assert caught.value.code == Code.FILE_TOO_LARGE and "data.bin" in caught.value.message
    git(work, "checkout", "--", "data.bin")
    os.rename(work / "data.bin", work / "moved.bin")
    with pytest.raises(Refused) as caught:
        capture(work, expected_head=None, base="HEAD", artifact_dir=None, max_file_size=LIMIT)
    assert caught.value.code == Code.FILE_TOO_LARGE and "moved.bin" in caught.value.message


def test_a_large_file_the_agent_committed_is_refused_too(work: Path):
    base = git(work, "rev-parse", "HEAD")
    (work / "big.bin").write_bytes(b"x" * (LIMIT + 1))
    git(work, "add", "big.bin")
    git(work, "commit", "-q", "-m", "big")
    with pytest.raises(Refused) as caught:
        capture(work, expected_head=None, base=base, artifact_dir=None, max_file_size=LIMIT)
    assert caught.value.code == Code.FILE_TOO_LARGE


def test_an_ignored_large_file_is_no_concern(work: Path):
    (work / ".gitignore").write_text("*.out\n")
    (work / "big.out").write_bytes(b"x" * (LIMIT + 1))
    captured = capture(work, expected_head=None, base="HEAD", artifact_dir=None, max_file_size=LIMIT)
    assert captured.changed == (".gitignore",)


def test_a_file_is_hashed_as_git_hashes_it_a_chunk_at_a_time(tmp_path: Path):
    path = tmp_path / "sparse"
    with open(path, "wb") as f:
        f.truncate(3 << 20)
        f.seek(1 << 20)
        f.write(b"middle")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert file_blob_id(fd, 3 << 20).decode() == git(tmp_path, "hash-object", str(path))
        os.lseek(fd, 0, os.SEEK_SET)
        with pytest.raises(ValueError):
            file_blob_id(fd, 3 << 20 + 1)
    finally:
        os.close(fd)


def test_a_large_loose_blob_is_written_out_streamed_sparse_and_checked(tmp_path: Path):
    from dulwich.repo import Repo

    path = tmp_path / "sparse"
    with open(path, "wb") as f:
        f.truncate(5 << 20)
        f.seek(2 << 20)
        f.write(b"middle")
    git(tmp_path, "init", "-q")
    sha = git(tmp_path, "-c", "core.bigFileThreshold=1g", "hash-object", "-w", str(path))
    out = tmp_path / "out"
    with Repo(str(tmp_path)) as repo:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            assert write_loose_blob(repo.object_store, sha.encode(), fd) == 5 << 20
        finally:
            os.close(fd)
        assert out.read_bytes() == path.read_bytes()
        assert os.stat(out).st_blocks * 512 <= 5 << 19  # most zeros were seeked over, not written
        tree = git(tmp_path, "write-tree")  # the empty tree: no blob
        fd = os.open(tmp_path / "wrong", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            with pytest.raises(ValueError):
                write_loose_blob(repo.object_store, tree.encode(), fd)
        finally:
            os.close(fd)


def test_an_objects_size_is_read_from_its_header_loose_packed_or_a_delta(tmp_path: Path):
    from dulwich.repo import Repo

    from docket.adapters.world.git.blobs import stored_size

    git(tmp_path, "init", "-q", "-b", "main")
    base = b"".join(b"line %d of a file that deltas well\n" % i for i in range(2000))
    (tmp_path / "a.txt").write_bytes(base)
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "commit", "-q", "-m", "one")
    first = git(tmp_path, "rev-parse", "HEAD:a.txt")
    (tmp_path / "a.txt").write_bytes(base + b"one more line\n")
    git(tmp_path, "commit", "-q", "-am", "two")
    second = git(tmp_path, "rev-parse", "HEAD:a.txt")
    with Repo(str(tmp_path)) as repo:
        assert stored_size(repo.object_store, second.encode()) == len(base) + 14  # loose
    git(tmp_path, "gc", "-q", "--aggressive")
    with Repo(str(tmp_path)) as repo:
        assert not (tmp_path / ".git" / "objects" / second[:2] / second[2:]).exists()
        sizes = {stored_size(repo.object_store, sha.encode()) for sha in (first, second)}
        assert sizes == {len(base), len(base) + 14}  # one of them stored as a delta of the other
        verify = subprocess.run(["git", "verify-pack", "-v", *map(str, (tmp_path / ".git/objects/pack").glob("*.idx"))],
                                cwd=tmp_path, capture_output=True, text=True, check=True).stdout
        assert any(line.startswith((first, second)) and len(line.split()) > 5 for line in verify.splitlines())
        assert stored_size(repo.object_store, b"0" * 40) is None


def test_a_large_blob_only_the_history_holds_is_found_before_anything_is_copied(work: Path):
    from dulwich.repo import Repo

    from docket.adapters.world.git.blobs import oversized_blobs

    home = work.parent / "home"
    git(work.parent, "clone", "-q", "--bare", str(work), str(home))
    (work / "big.bin").write_bytes(b"x" * (LIMIT + 1))
    git(work, "add", "big.bin")
    git(work, "commit", "-q", "-m", "big")
    big = git(work, "rev-parse", "HEAD:big.bin")
    git(work, "rm", "-q", "big.bin")
    git(work, "commit", "-q", "-m", "gone")
    head, tree = git(work, "rev-parse", "HEAD"), git(work, "rev-parse", "HEAD^{tree}")
    with Repo(str(work)) as source, Repo(str(home)) as target:
        assert oversized_blobs(source.object_store, target.object_store, head, tree, LIMIT) == [(big.encode(),
                                                                                                LIMIT + 1)]
        assert oversized_blobs(source.object_store, target.object_store, head, tree, LIMIT + 1) == []
        # data.bin is the home's own already: never counted, however large
        assert oversized_blobs(source.object_store, target.object_store, head, tree, 10) == [(big.encode(),
                                                                                             LIMIT + 1)]
