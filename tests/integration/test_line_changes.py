"""The MergePort's changed_lines against real git: the hunks two commits each made against their merge base, and
the paths that can only be compared as whole files (adapters/world/git/line_changes.py)."""

from __future__ import annotations

from pathlib import Path

from docket.adapters.world.git.integration_refs import DulwichMerges
from docket.domain.merge_queue.line_overlap import line_overlap
from tests.conftest import git

BIG = [f"line {n}\n" for n in range(100)]


def _branch(repo: Path, base: str, name: str, files: dict[str, bytes]) -> str:
    git(repo, "checkout", "-q", "-b", name, base)
    for path, data in files.items():
        (repo / path).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


def _edited(**lines: str) -> bytes:
    text = list(BIG)
    for n, new in lines.items():
        text[int(n.removeprefix("l"))] = new + "\n"
    return "".join(text).encode()


def _base(repo: Path) -> str:
    (repo / "big.py").write_text("".join(BIG))
    (repo / "logo.bin").write_bytes(b"\0\1\2")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "big")
    return git(repo, "rev-parse", "HEAD")


def test_edits_far_apart_in_one_file_do_not_meet_and_the_same_lines_do(repo: Path) -> None:
    base = _base(repo)
    top = _branch(repo, base, "top", {"big.py": _edited(l3="TOP")})
    bottom = _branch(repo, base, "bottom", {"big.py": _edited(l90="BOTTOM")})
    middle = _branch(repo, base, "middle", {"big.py": _edited(l3="ALSO TOP", l50="MIDDLE")})
    merges = DulwichMerges()
    apart = merges.changed_lines(repo / ".git", top, bottom, ["big.py"])
    assert apart == {"big.py": (((3, 4),), ((90, 91),))}
    assert line_overlap(apart) is None
    same = merges.changed_lines(repo / ".git", top, middle, ["big.py"])
    assert same == {"big.py": (((3, 4),), ((3, 4), (50, 51)))}
    assert line_overlap(same).paths == ("big.py",)


def test_an_insertion_next_to_the_other_sides_change_meets_it(repo: Path) -> None:
    base = _base(repo)
    changed = _branch(repo, base, "changed", {"big.py": _edited(l10="TEN")})
    inserted = _branch(repo, base, "inserted",
                       {"big.py": "".join(BIG[:11] + ["new\n"] + BIG[11:]).encode()})  # after line 10
    lines = DulwichMerges().changed_lines(repo / ".git", changed, inserted, ["big.py"])
    assert lines == {"big.py": (((10, 11),), ((11, 11),))}
    assert line_overlap(lines) is not None


def test_a_binary_file_is_compared_as_a_whole_file(repo: Path) -> None:
    base = _base(repo)
    one = _branch(repo, base, "one", {"logo.bin": b"\0one"})
    other = _branch(repo, base, "other", {"logo.bin": b"\0other"})
    lines = DulwichMerges().changed_lines(repo / ".git", one, other, ["logo.bin"])
    assert lines == {"logo.bin": (None, None)}
    assert line_overlap(lines).whole_files == ("logo.bin",)


def test_a_side_whose_history_holds_the_others_change_meets_nothing(repo: Path) -> None:
    base = _base(repo)
    first = _branch(repo, base, "first", {"big.py": _edited(l3="FIRST")})
    later = _branch(repo, first, "later", {"big.py": _edited(l3="LATER")})  # built on first's change
    lines = DulwichMerges().changed_lines(repo / ".git", first, later, ["big.py"])
    assert lines == {"big.py": ((), ((3, 4),))}
    assert line_overlap(lines) is None


def test_unreadable_commits_leave_every_path_to_be_compared_whole(repo: Path) -> None:
    assert DulwichMerges().changed_lines(repo / ".git", "f" * 40, "e" * 40, ["a", "b"]) == {
        "a": (None, None), "b": (None, None)}


def test_a_conflict_is_foreseen_with_the_steps_queued_ahead_and_not_merged_yet(repo: Path) -> None:
    """The prediction at enqueue merges the candidate onto the integration tip and with each step waiting ahead of
    it, computed and never written (git fsck finds nothing left behind)."""
    from docket.adapters.service_layer.merge_queue.foreseen import predicted_conflicts

    base = _base(repo)
    ahead = _branch(repo, base, "ahead", {"big.py": _edited(l30="line 30, ahead")})
    clashing = _branch(repo, base, "clash", {"big.py": _edited(l30="line 30, clashing")})
    elsewhere = _branch(repo, base, "elsewhere", {"big.py": _edited(l80="line 80, elsewhere")})
    candidate = _branch(repo, base, "candidate", {"big.py": _edited(l30="line 30, candidate")})
    merges = DulwichMerges()
    assert predicted_conflicts(merges, repo, base, candidate) == []  # onto the tip alone: it merges
    assert predicted_conflicts(merges, repo, base, candidate, [elsewhere]) == []
    assert predicted_conflicts(merges, repo, base, candidate, [elsewhere, ahead]) == ["big.py"]
    assert predicted_conflicts(merges, repo, base, elsewhere, [ahead, clashing]) == []  # elsewhere meets neither
    objects = git(repo, "count-objects", "-v")
    assert predicted_conflicts(merges, repo, ahead, elsewhere) == []  # a clean merge, foreseen: nothing written
    assert git(repo, "count-objects", "-v") == objects
    assert "dangling" not in git(repo, "fsck", "--no-progress", "--no-reflogs")
