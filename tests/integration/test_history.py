"""adapters/world/git/history.py on real repositories: root commits (two when unrelated histories were merged), the
first-parent line, and what an unknown commit gives."""

from __future__ import annotations

from pathlib import Path

from docket.adapters.world.git.history import first_parents, root_commits
from tests.conftest import git, make_repo


def _commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name + "\n")
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


def test_roots_and_the_first_parent_line(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    first = git(repo, "rev-parse", "HEAD")
    a = _commit(repo, "a")
    git(repo, "checkout", "-q", "--orphan", "other")
    git(repo, "rm", "-rq", "--cached", ".")
    orphan = _commit(repo, "o")
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "merge", "-q", "--allow-unrelated-histories", "-m", "merge", "other")
    merge = git(repo, "rev-parse", "HEAD")
    b = _commit(repo, "b")
    assert root_commits(repo, b) == tuple(sorted((first, orphan)))
    assert root_commits(repo, a) == (first,)
    assert first_parents(repo, b, a, 100) == [b, merge, a]  # stops at the commit asked for
    assert first_parents(repo, b, "f" * 40, 100) == [b, merge, a, first]  # or at the root
    assert first_parents(repo, b, a, 2) == [b, merge]  # or at the limit
    assert root_commits(repo, "f" * 40) is None and first_parents(repo, "f" * 40, a, 10) == []
    assert root_commits(tmp_path / "nothing", b) is None
