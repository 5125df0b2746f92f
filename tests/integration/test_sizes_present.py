"""An object too large for dulwich to read is still known to be there: dulwich tells a loose object is present by
reading it whole, and refused one past its limit (exit 70 when a user's max_file_size let a 1 GiB file through and
its blob was already stored). core.bigFileThreshold is set small so the blob can be small too."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dulwich.objects import Blob

from docket.adapters.world.git.blobs import has_object
from docket.adapters.world.git.objects import add_object
from docket.adapters.world.git.repository import open_repo
from tests.conftest import git


def test_a_stored_blob_past_the_read_limit_is_present_and_not_written_again(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    content = b"large\n" * 40_000  # 240 KB
    sha = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=content, capture_output=True,
                         check=True).stdout.strip()
    git(repo, "config", "core.bigFileThreshold", str(100_000))  # dulwich reads no loose object over 100 KB now
    store = open_repo(repo).object_store
    assert has_object(store, sha)
    assert not has_object(store, b"0" * 40)
    assert add_object(store, Blob.from_string(content)) == sha
