"""The MergePort's foreign_commits against real git (what `git rev-list found ^expected` lists) and the fake: the
commits a target moved by someone else brought, and whether it still holds the commit docket expected."""

from __future__ import annotations

from pathlib import Path

from docket.adapters.world.git.integration_refs import DulwichMerges
from tests.conftest import git
from tests.fakes.merges import FakeMerges
from tests.fakes.repository import FakeRepository


def _commit(repo: Path, name: str) -> str:
    (repo / name).write_text(f"{name}\n")
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


def test_the_commits_a_pushed_target_brought_newest_first(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    first, second = _commit(repo, "one.txt"), _commit(repo, "two.txt")
    found = DulwichMerges().foreign_commits(repo / ".git", base, second)
    assert (found.commits, found.count, found.complete, found.keeps_expected) == ((second, first), 2, True, True)
    assert found.commits == tuple(git(repo, "rev-list", second, f"^{base}").split())


def test_a_target_reset_to_another_history_keeps_not_the_expected_commit(repo: Path) -> None:
    expected = _commit(repo, "docket-made.txt")
    git(repo, "checkout", "-q", "--orphan", "evil")
    git(repo, "rm", "-q", "-rf", ".")
    backdoor = _commit(repo, "backdoor.py")
    found = DulwichMerges().foreign_commits(repo / ".git", expected, backdoor)
    assert (found.commits, found.complete, found.keeps_expected) == ((backdoor,), True, False)


def test_an_expected_commit_the_repository_lost_leaves_it_incomplete(repo: Path) -> None:
    tip = git(repo, "rev-parse", "HEAD")
    found = DulwichMerges().foreign_commits(repo / ".git", "f" * 40, tip)
    assert (found.commits, found.complete, found.keeps_expected) == ((tip,), False, False)
    assert "not a commit" in found.detail
    assert not DulwichMerges().foreign_commits(repo.parent / "nowhere", tip, tip).complete


def test_the_fake_lists_the_same(tmp_path: Path) -> None:
    repository = FakeRepository()
    base = repository.point("main")
    tree = repository.add_tree("t")
    first = repository.add_commit((base,), tree, "one")
    second = repository.add_commit((first,), tree, "two")
    merges = FakeMerges({tmp_path: repository})
    found = merges.foreign_commits(tmp_path, base, second)
    assert (found.commits, found.count, found.complete, found.keeps_expected) == ((second, first), 2, True, True)
    other = repository.add_commit((), tree, "orphan")
    assert merges.foreign_commits(tmp_path, second, other).keeps_expected is False
