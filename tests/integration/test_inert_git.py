"""The git docket runs (inert_git.py) against real repositories: a target checked out in a linked worktree is moved
with no planted program running, the repository's own exclude rules still count, and git gets none of docket's
environment."""

from __future__ import annotations

import os
from pathlib import Path

from docket.adapters.world.git.checkout import observe_checkout, update_checkout
from tests.attacks.foreign_code import markers, plant
from tests.conftest import git

INERT = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "filter.evil.clean=",
         "-c", "filter.evil.smudge=", "-c", "filter.evil.process=", "-c", "filter.evil.required=false")


def _two_commits(repo: Path) -> tuple[str, str]:
    old = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("one\n")
    git(repo, *INERT, "add", "a.txt")
    git(repo, *INERT, "commit", "-q", "--no-verify", "-m", "new")
    new = git(repo, "rev-parse", "HEAD")
    git(repo, *INERT, "reset", "-q", "--hard", old)
    return old, new


def test_a_target_checked_out_in_a_linked_worktree_moves_and_nothing_planted_runs(repo, tmp_path):
    ran = tmp_path / "ran"
    plant(repo, ran)
    old, new = _two_commits(repo)
    linked = tmp_path / "release"
    git(repo, *INERT, "worktree", "add", "-q", "-b", "release", str(linked), old)
    assert markers(ran) == []
    assert observe_checkout(linked, old, new).state == "at-old"
    update_checkout(linked, old, new)
    assert observe_checkout(linked, old, new).state == "at-new"
    assert (linked / "a.txt").read_text() == "one\n" and not (repo / "a.txt").exists()
    assert git(repo, *INERT, "-C", str(linked), "diff-index", "--cached", "--name-only", new) == ""
    assert markers(ran) == []


def test_the_repositorys_exclude_rules_still_make_an_ignored_file_expendable(repo, tmp_path):
    old, new = _two_commits(repo)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("a.txt\n")
    (repo / "a.txt").write_text("ignored, in the way\n")
    assert observe_checkout(repo, old, new).state == "at-old"  # git overwrites an ignored file, and so may docket
    (repo / ".git" / "info" / "exclude").write_text("")
    assert observe_checkout(repo, old, new).changes == ("untracked a.txt",)


def test_git_gets_none_of_dockets_environment(repo, tmp_path, monkeypatch):
    old, new = _two_commits(repo)
    seen = tmp_path / "seen"
    seen.mkdir()
    real = git(repo, "--exec-path")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text(f"#!/bin/sh\nenv > '{seen}/env'\necho \"$@\" > '{seen}/argv'\n"
                              f"exec '{real}/git' \"$@\"\n")
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKET_TEST_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(tmp_path / "evil"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "src"))
    update_checkout(repo, old, new)
    env = dict(line.split("=", 1) for line in (seen / "env").read_text().splitlines() if "=" in line)
    assert "DOCKET_TEST_API_KEY" not in env and "GIT_EXTERNAL_DIFF" not in env and "PYTHONPATH" not in env
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_WORK_TREE"] == str(repo) and env["GIT_DIR"] != str(repo / ".git")
    assert "core.hooksPath=" in (seen / "argv").read_text()
    assert (repo / "a.txt").read_text() == "one\n"


def test_the_repositorys_data_settings_still_count_file_modes_ignored(repo, tmp_path):
    old, new = _two_commits(repo)
    (repo / "README.md").chmod(0o755)
    assert observe_checkout(repo, old, new).changes == ("unstaged README.md",)
    git(repo, "config", "core.fileMode", "false")  # copied into docket's own config: the mode no longer counts
    assert observe_checkout(repo, old, new).state == "at-old"


def test_a_sparse_checkout_moves_only_inside_its_cone(repo, tmp_path):
    (repo / "x").mkdir()
    (repo / "y").mkdir()
    (repo / "x" / "a.txt").write_text("a\n")
    (repo / "y" / "b.txt").write_text("b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two folders")
    old = git(repo, "rev-parse", "HEAD")
    (repo / "x" / "c.txt").write_text("c\n")
    (repo / "y" / "d.txt").write_text("d\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one more in each")
    new = git(repo, "rev-parse", "HEAD")
    git(repo, "reset", "-q", "--hard", old)
    git(repo, "sparse-checkout", "set", "x")  # in the checkout's own config.worktree
    assert not (repo / "y").exists()
    update_checkout(repo, old, new)
    assert observe_checkout(repo, old, new).state == "at-new"
    assert (repo / "x" / "c.txt").read_text() == "c\n" and not (repo / "y").exists()
