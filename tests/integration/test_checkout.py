"""The checkout port against real git worktrees: clean at which commit, what is dirty, and the two-tree update that
refuses when a local change is in the way; the fake answers as the real one does."""

from __future__ import annotations

from pathlib import Path

import pytest

from docket.adapters.world.checkout import observe_checkout, update_checkout
from docket.domain.integration import CheckoutObservation

from ..conftest import git


@pytest.fixture
def commits(repo: Path) -> tuple[str, str]:
    """main's commit (old) and a child that adds a.txt and removes README.md (new); main stays at old."""
    old = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "rm", "-q", "README.md")
    git(repo, "commit", "-q", "-m", "new")
    new = git(repo, "rev-parse", "HEAD")
    git(repo, "reset", "-q", "--hard", old)
    return old, new


def test_a_clean_checkout_is_at_old_then_updated_to_new_and_back(repo, commits):
    old, new = commits
    assert observe_checkout(repo, old, new) == CheckoutObservation("at-old")
    update_checkout(repo, old, new)
    assert observe_checkout(repo, old, new) == CheckoutObservation("at-new")
    assert (repo / "a.txt").read_text() == "one\n" and not (repo / "README.md").exists()
    assert git(repo, "rev-parse", "HEAD") == old  # the branch is not the checkout's to move
    update_checkout(repo, old, new)  # not at old: nothing
    assert observe_checkout(repo, old, new).state == "at-new"
    update_checkout(repo, new, old)  # back
    assert observe_checkout(repo, old, new).state == "at-old" and git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("change, named", [
    (lambda r: (r / "README.md").write_text("x\n"), "unstaged README.md"),
    (lambda r: ((r / "README.md").write_text("x\n"), git(r, "add", "README.md")), "staged README.md"),
    (lambda r: (r / "notes.txt").write_text("x\n"), "untracked notes.txt"),
    (lambda r: (r / "a.txt").write_text("in the way\n"), "untracked a.txt"),  # new's file, untracked here
])
def test_a_local_change_is_dirty_named_and_never_overwritten(repo, commits, change, named):
    old, new = commits
    change(repo)
    before = {p.name: p.read_text() for p in repo.iterdir() if p.is_file()}
    observed = observe_checkout(repo, old, new)
    assert observed.state == "dirty" and named in observed.changes
    update_checkout(repo, old, new)
    assert {p.name: p.read_text() for p in repo.iterdir() if p.is_file()} == before
    assert git(repo, "diff-index", "--cached", "--name-only", old) == ("README.md" if "staged" in named[:6] else "")


def test_ignored_files_are_not_changes_and_a_long_list_is_cut(repo, commits):
    old, new = commits
    (repo / ".git" / "info" / "exclude").write_text("*.o\n")
    (repo / "x.o").write_text("ignored\n")
    assert observe_checkout(repo, old, new).state == "at-old"
    for n in range(8):
        (repo / f"n{n}.txt").write_text("x\n")
    observed = observe_checkout(repo, old, new)
    assert len(observed.changes) == 6 and observed.changes[-1] == "3 more"


def test_what_git_cannot_read_is_unreadable(tmp_path, commits):
    old, new = commits
    assert observe_checkout(tmp_path / "nowhere", old, new).state == "unreadable"
    (tmp_path / "plain").mkdir()
    observed = observe_checkout(tmp_path / "plain", old, new)
    assert observed.state == "unreadable" and "not a git repository" in observed.detail
    update_checkout(tmp_path / "plain", old, new)  # nothing, no exception


def test_the_environment_of_another_repository_is_not_inherited(repo, commits, tmp_path, monkeypatch):
    old, new = commits
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "index"))
    assert observe_checkout(repo, old, new).state == "at-old"


def test_the_fake_observes_and_updates_a_checkout_as_the_real_one_does(tmp_path):
    from docket.adapters.world.fakes import FakeGit

    fake = FakeGit()
    old, new = "a" * 40, "b" * 40
    assert fake.observe_checkout(tmp_path, old, new).state == "at-old"
    fake.update_checkout(tmp_path, old, new)
    assert fake.observe_checkout(tmp_path, old, new).state == "at-new"
    fake.update_checkout(tmp_path, new, old)
    assert fake.observe_checkout(tmp_path, old, new).state == "at-old"
    fake.checkouts[tmp_path] = ("unstaged README.md",)
    assert fake.observe_checkout(tmp_path, old, new) == CheckoutObservation("dirty", ("unstaged README.md",))
    fake.update_checkout(tmp_path, old, new)
    assert fake.observe_checkout(tmp_path, old, new).state == "dirty"


@pytest.mark.parametrize("same_tree", [False, True])
def test_the_target_intent_moves_a_clean_checkout_then_the_branch(repo, commits, same_tree):
    """Through the intent kind: act once, and the branch, HEAD, index and files are the integrated commit's; also
    when the integrated commit has the expected commit's very tree (a merge that changed nothing)."""
    from docket.adapters.app.intents import INTEGRATION_TARGET
    from docket.adapters.world.git import DulwichGit
    from docket.domain import events as ev
    from docket.domain import integration
    from docket.domain.effects import Act

    old, new = commits
    if same_tree:
        new = git(repo, "commit-tree", "-p", old, "-m", "same tree", git(repo, "rev-parse", f"{old}^{{tree}}"))
    intent = ev.IntegrationTargetRequestedV2(
        stream="integration:r1", version=5, recorded_at="2026-01-01T00:00:00.000Z", intent_id="t", run_id="r1",
        repository=str(repo / ".git"), target_ref="refs/heads/main", expected_commit=old, commit=new,
        tree=git(repo, "rev-parse", f"{new}^{{tree}}"), checkout=str(repo))
    state = integration.Integration(run_id="r1", version=5)
    port = DulwichGit()
    observed = INTEGRATION_TARGET.observe(port, intent, None)
    assert observed.checked_out == str(repo) and observed.checkout.state == "at-old"
    assert isinstance(INTEGRATION_TARGET.decide(state, intent, observed, "2026-01-01T00:00:00.000Z"), Act)
    INTEGRATION_TARGET.act(port, intent, observed)
    after = INTEGRATION_TARGET.decide(state, intent, INTEGRATION_TARGET.observe(port, intent, None),
                                      "2026-01-01T00:00:00.000Z")
    assert after.type_name() == "IntegrationCompleted.v1"
    assert git(repo, "rev-parse", "HEAD") == new and git(repo, "status", "--porcelain") == ""
