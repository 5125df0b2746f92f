"""The checkout port against real git worktrees: clean at which commit, what is dirty, and the two-tree update that
refuses when a local change is in the way; the fake answers as the real one does."""

from __future__ import annotations

from pathlib import Path

import pytest

from docket.adapters.world.git.checkout import observe_checkout, update_checkout
from docket.domain.merge_queue.target_move import CheckoutObservation

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


def test_untracked_and_ignored_files_out_of_the_way_are_no_changes_and_stay(repo, commits):
    """docket init's docket.toml, a tasks.toml, a .venv/: the move writes none of their paths (git's own rule)."""
    old, new = commits
    (repo / ".git" / "info" / "exclude").write_text("*.o\n")
    mine = {"x.o": "ignored\n", "docket.toml": "[run]\n", "tasks.toml": "[[tasks]]\n", ".venv/bin/python": "#!\n",
            ".venv/lib/site.py": "x = 1\n"}
    for path, text in mine.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    assert observe_checkout(repo, old, new) == CheckoutObservation("at-old")
    update_checkout(repo, old, new)
    assert observe_checkout(repo, old, new) == CheckoutObservation("at-new")
    assert {path: (repo / path).read_text() for path in mine} == mine


def test_a_long_list_of_paths_in_the_way_is_cut(repo):
    old = git(repo, "rev-parse", "HEAD")
    for n in range(8):
        (repo / f"n{n}.txt").write_text("theirs\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "eight")
    new = git(repo, "rev-parse", "HEAD")
    git(repo, "reset", "-q", "--hard", old)
    for n in range(8):
        (repo / f"n{n}.txt").write_text("mine\n")
    observed = observe_checkout(repo, old, new)
    assert observed.state == "dirty" and len(observed.changes) == 6 and observed.changes[-1] == "3 more"
    assert observed.changes[0] == "untracked n0.txt"


def test_a_tracked_file_rewritten_with_the_same_content_does_not_keep_the_checkout_from_moving(repo, commits):
    """Its stat data no longer matches the index: git status calls it clean, and so must the move (updateInstead
    refreshes the index first)."""
    import os

    old, new = commits
    (repo / "README.md").write_text((repo / "README.md").read_text())  # the same bytes, new stat data
    os.utime(repo / "README.md", (2_000_000_000, 2_000_000_000))
    assert observe_checkout(repo, old, new).state == "at-old"
    update_checkout(repo, old, new)  # new removes README.md
    assert observe_checkout(repo, old, new).state == "at-new" and not (repo / "README.md").exists()


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
    from tests.fakes.merges import FakeMerges

    fake = FakeMerges()
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
    from docket.adapters.service_layer.kernel.intents import INTEGRATION_TARGET
    from docket.adapters.world.git.integration_refs import DulwichMerges
    from docket.domain import events as ev
    from docket.domain.merge_queue import integration
    from docket.domain.effects import Act

    old, new = commits
    if same_tree:
        new = git(repo, "commit-tree", "-p", old, "-m", "same tree", git(repo, "rev-parse", f"{old}^{{tree}}"))
    intent = ev.IntegrationTargetRequestedV2(
        stream="integration:r1", version=5, recorded_at="2026-01-01T00:00:00.000Z", intent_id="t", run_id="r1",
        repository=str(repo / ".git"), target_ref="refs/heads/main", expected_commit=old, commit=new,
        tree=git(repo, "rev-parse", f"{new}^{{tree}}"), checkout=str(repo))
    state = integration.Integration(run_id="r1", version=5)
    port = DulwichMerges()
    observed = INTEGRATION_TARGET.observe(port, intent, None)
    assert observed.checked_out == str(repo) and observed.checkout.state == "at-old"
    assert isinstance(INTEGRATION_TARGET.decide(state, intent, observed, "2026-01-01T00:00:00.000Z"), Act)
    INTEGRATION_TARGET.act(port, intent, observed)
    after = INTEGRATION_TARGET.decide(state, intent, INTEGRATION_TARGET.observe(port, intent, None),
                                      "2026-01-01T00:00:00.000Z")
    assert after.type_name() == "IntegrationCompleted.v1"
    assert git(repo, "rev-parse", "HEAD") == new and git(repo, "status", "--porcelain") == ""


# --- what is in the way, compared with git's own move ---------------------------------------------------------------


def _put(repo: Path, path: str, text: str = "mine\n") -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)


def _symlink(repo: Path, path: str, to: str) -> None:
    import os

    (repo / to).mkdir(exist_ok=True)
    os.symlink(to, repo / path)


# name: (old's files, new's files, what the user has in the checkout); .gitignore (in both) ignores *.o and build/
LAYOUTS = {
    "untracked file where the target writes one": ({}, {"a.txt": "n"}, lambda r: _put(r, "a.txt")),
    "two of them": ({}, {"a.txt": "n", "b/c.txt": "n"}, lambda r: (_put(r, "a.txt"), _put(r, "b/c.txt"))),
    "untracked file where the target needs a folder": ({}, {"x/y": "n"}, lambda r: _put(r, "x")),
    "symlink where the target needs a folder": ({}, {"s/f": "n"}, lambda r: _symlink(r, "s", "real")),
    "untracked files in a folder the target makes a file": ({"d/x": "x"}, {"d": "n"}, lambda r: _put(r, "d/y")),
    "untracked folder where the target writes a file": ({}, {"e": "n"}, lambda r: _put(r, "e/f")),
    "empty folder where the target writes a file": ({}, {"e": "n"}, lambda r: (r / "e").mkdir()),
    "ignored file where the target writes one": ({}, {"ig.o": "n"}, lambda r: _put(r, "ig.o")),
    "ignored file where the target needs a folder": ({}, {"x.o/y": "n"}, lambda r: _put(r, "x.o")),
    "ignored files in a folder the target makes a file": ({"d/x": "x"}, {"d": "n"}, lambda r: _put(r, "d/y.o")),
    "ignored folder where the target writes a file": ({}, {"build": "n"}, lambda r: _put(r, "build/f")),
    "untracked beside what the target writes": ({}, {"v/f": "n"}, lambda r: _put(r, "v/g")),
    "untracked elsewhere": ({}, {"a.txt": "n"}, lambda r: (_put(r, "docket.toml"), _put(r, ".venv/lib/x.py"))),
    "a tracked file the target makes a folder": ({"x": "x"}, {"x/y": "n"}, lambda r: None),
}


def _files(root: Path) -> dict[str, str]:
    """Every file and symlink under root but .git: its text, or where it links."""
    found = {}
    for path in root.rglob("*"):
        name = path.relative_to(root).as_posix()
        if name == ".git" or name.startswith(".git/"):
            continue
        if path.is_symlink():
            found[name] = "-> " + str(path.readlink())
        elif path.is_file():
            found[name] = path.read_text()
    return found


def _layout(repo: Path, old_files: dict[str, str], new_files: dict[str, str]) -> tuple[str, str]:
    (repo / ".gitignore").write_text("*.o\nbuild/\n")
    for path, text in old_files.items():
        _put(repo, path, text)
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m", "old")
    old = git(repo, "rev-parse", "HEAD")
    git(repo, "rm", "-q", "-r", "--cached", ".")
    for path in old_files:
        (repo / path).unlink()
        if (repo / path).parent != repo and not any((repo / path).parent.iterdir()):
            (repo / path).parent.rmdir()
    for path, text in new_files.items():
        _put(repo, path, text)
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m", "new")
    new = git(repo, "rev-parse", "HEAD")
    git(repo, "reset", "-q", "--hard", old)
    git(repo, "clean", "-q", "-f", "-d", "-x")
    return old, new


def _named(change: str) -> str:
    """The path a change names, as git names it ("untracked d/y" -> d/y, "untracked files in d/" -> d)."""
    return change.removeprefix("untracked ").removeprefix("files in ").removesuffix("/")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_what_is_in_the_way_is_what_git_merge_refuses_and_the_move_leaves_what_git_leaves(repo, tmp_path, layout):
    """The same move done by git in a copy of the checkout (git merge --ff-only, which names every path in the way):
    docket's checkout is dirty exactly when git refuses, names the same paths, and after the update holds the same
    files as git's copy (ignored files are git's to overwrite; untracked ones elsewhere stay)."""
    import shutil
    import subprocess

    old_files, new_files, local = LAYOUTS[layout]
    old, new = _layout(repo, old_files, new_files)
    local(repo)
    copy = tmp_path / "by-git"
    shutil.copytree(repo, copy, symlinks=True)
    merged = subprocess.run(["git", "merge", "-q", "--ff-only", new], cwd=copy, capture_output=True, text=True,
                            env={**__import__("os").environ, "LC_ALL": "C"})
    refused_by_git = sorted(line[1:] for line in merged.stderr.splitlines() if line.startswith("\t"))
    assert (merged.returncode == 0) == (refused_by_git == []), merged.stderr

    observed = observe_checkout(repo, old, new)
    assert observed.state == ("at-old" if merged.returncode == 0 else "dirty"), observed
    assert sorted(_named(change) for change in observed.changes) == refused_by_git
    before = _files(repo)
    update_checkout(repo, old, new)
    assert _files(repo) == (_files(copy) if merged.returncode == 0 else before)
    assert observe_checkout(repo, old, new).state == ("at-new" if merged.returncode == 0 else "dirty")


@pytest.mark.parametrize("world", ["real", "fake"])
def test_the_merge_ports_move_a_clean_checkout_and_never_a_dirty_one_alike(world, repo, commits):
    from docket.adapters.world.git.integration_refs import DulwichMerges
    from tests.fakes.merges import FakeMerges

    old, new = commits
    port = DulwichMerges() if world == "real" else FakeMerges()
    assert port.observe_checkout(repo, old, new).state == "at-old"
    port.update_checkout(repo, old, new)
    assert port.observe_checkout(repo, old, new).state == "at-new"
    port.update_checkout(repo, old, new)  # not at old: nothing
    assert port.observe_checkout(repo, old, new).state == "at-new"
    port.update_checkout(repo, new, old)
    assert port.observe_checkout(repo, old, new).state == "at-old"
    if world == "real":
        (repo / "README.md").write_text("x\n")
    else:
        port.checkouts[repo] = ("unstaged README.md",)
    assert port.observe_checkout(repo, old, new) == CheckoutObservation("dirty", ("unstaged README.md",))
    port.update_checkout(repo, old, new)
    assert port.observe_checkout(repo, old, new).state == "dirty"
