"""A file changed on both sides whose blobs dulwich will not hold in memory is a conflict of the merge, never an
error: as a binary file, nothing is written and the path is named. (dulwich's limit on a loose object is the
repository's core.bigFileThreshold, set small here so the blobs can be small too.)"""

from __future__ import annotations

from pathlib import Path

from docket.adapters.world.git.merge import merge_candidate
from tests.conftest import git
from tests.integration.test_merge import MESSAGE, SEVEN, loose_objects, three

SIZE = 2 << 20


def test_a_file_too_large_to_read_changed_on_both_sides_is_a_conflict(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    large = b"\0" * SIZE
    _, ours, theirs = three(repo, {b"f": ("100644", SEVEN), b"big": ("100644", large)},
                            {b"f": ("100644", SEVEN), b"big": ("100644", b"a" + large)},
                            {b"f": ("100644", SEVEN + b"h\n"), b"big": ("100644", b"b" + large)})
    git(repo, "config", "core.bigFileThreshold", str(1 << 20))  # from here dulwich reads no loose object over 1 MiB
    before = loose_objects(repo)
    result = merge_candidate(repo, ours, theirs, MESSAGE)
    assert (result.state, result.conflicts, result.commit) == ("conflicted", ("big",), None)
    assert loose_objects(repo) == before
