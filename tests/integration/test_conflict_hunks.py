"""The hunks a repairing agent is shown for a conflict: both sides at the path, escaped and bounded."""

from __future__ import annotations

from pathlib import Path

from docket.adapters.world.git.conflicts import MAX_LINES, conflict_hunks
from tests.conftest import git, make_repo


def _sides(repo: Path, ours: str, theirs: str) -> tuple[str, str]:
    base = git(repo, "rev-parse", "HEAD")
    (repo / "notes.txt").write_text(ours)
    git(repo, "commit", "-q", "-am", "ours")
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", base)
    (repo / "notes.txt").write_text(theirs)
    git(repo, "commit", "-q", "-am", "theirs")
    return head, git(repo, "rev-parse", "HEAD")


def test_both_sides_are_shown_with_control_characters_escaped(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("notes\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "notes")
    head, candidate = _sides(repo, "notes\ntwo \x1b[31mred\n", "notes\nfive\n")
    shown = conflict_hunks(repo / ".git", head, candidate, ["notes.txt", "absent.txt"])
    assert "-two \\x1b[31mred" in shown and "+five" in shown and "\x1b" not in shown
    assert "integrated head: notes.txt" in shown and "absent.txt" not in shown


def test_a_long_conflict_is_cut(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("notes\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "notes")
    head, candidate = _sides(repo, "".join(f"a{n}\n" for n in range(200)), "".join(f"b{n}\n" for n in range(200)))
    shown = conflict_hunks(repo / ".git", head, candidate, ["notes.txt"]).splitlines()
    assert len(shown) == MAX_LINES + 1 and shown[-1].startswith("... (")
