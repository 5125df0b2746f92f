"""Merging candidates on a docket ref with dulwich, against real git: clean merges agree with
``git merge-tree --write-tree``, conflicts name their paths and write nothing, refs move only by
compare-and-swap, and everything docket writes passes ``git fsck --strict``."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.merges import FakeMerges
from tests.fakes.repository import FakeRepository
from docket.adapters.world.git.integration_refs import DulwichMerges, advance_ref, observe_integration
from docket.adapters.world.git.merge import merge_candidate
from docket.domain.effects import MergeResult
from docket.domain.kernel.errors import BadInput
from docket.domain.merge_queue.merges import PathOverlap, changed_paths_overlap, merge_message, trailers
from tests.conftest import git

REF = "refs/docket/integrations/run-7k2m9x4q"
MESSAGE = "docket: merge t1\n"
SUBMODULE = "1234567890abcdef1234567890abcdef12345678"
Files = dict[bytes, tuple[str, bytes]]  # path -> (mode, content; for a gitlink the commit id)


def _git(repo: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_INDEX_FILE": str(repo / ".git" / "test-index")}
    return subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, check=check)


def commit(repo: Path, files: Files, *parents: str, when: int = 1_767_225_600, message: str = "c") -> str:
    """A commit of exactly files on parents, built with git plumbing in a private index."""
    (repo / ".git" / "test-index").unlink(missing_ok=True)
    lines = b""
    for path, (mode, content) in files.items():
        sha = content if mode == "160000" else _git(repo, "hash-object", "-w", "--stdin", stdin=content).stdout.strip()
        lines += mode.encode() + b" " + sha + b"\t" + path + b"\0"
    _git(repo, "update-index", "-z", "--index-info", stdin=lines)
    tree = _git(repo, "write-tree").stdout.decode().strip()
    env_date = f"@{when} +0000"
    args = ["commit-tree", tree, "-m", message]
    for parent in parents:
        args += ["-p", parent]
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
                               "GIT_AUTHOR_DATE": env_date, "GIT_COMMITTER_DATE": env_date}).stdout.strip()


def git_merge_tree(repo: Path, ours: str, theirs: str) -> str | None:
    """git's own merged tree, or None when git finds a conflict."""
    result = _git(repo, "merge-tree", "--write-tree", ours, theirs, check=False)
    assert result.returncode in (0, 1), result.stderr
    return result.stdout.decode().splitlines()[0] if result.returncode == 0 else None


def fsck(repo: Path) -> None:
    result = _git(repo, "fsck", "--strict", "--no-dangling", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def ref(repo: Path, name: str) -> str | None:
    result = _git(repo, "rev-parse", "-q", "--verify", name, check=False)
    return result.stdout.decode().strip() or None


def loose_objects(repo: Path) -> set[str]:
    objects = repo / ".git" / "objects"
    return {f"{d.name}{f.name}" for d in objects.iterdir() if len(d.name) == 2 for f in d.iterdir()}


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path


def text(*lines: str) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode()


SEVEN = text("a", "b", "c", "d", "e", "f", "g")


def three(repo: Path, base: Files, ours: Files, theirs: Files) -> tuple[str, str, str]:
    """base, then ours and theirs each on base, one second apart (theirs the latest)."""
    b = commit(repo, base)
    return b, commit(repo, ours, b, when=1_767_225_601), commit(repo, theirs, b, when=1_767_225_602)


def assert_merges_like_git(repo: Path, ours: str, theirs: str) -> str:
    result = merge_candidate(repo, ours, theirs, MESSAGE)
    assert result.state == "merged", result
    assert result.tree == git_merge_tree(repo, ours, theirs)
    return result.commit


# Clean merges


def test_disjoint_files_merge_into_a_two_parent_commit_as_git_would(empty: Path) -> None:
    base, ours, theirs = three(empty, {b"a": ("100644", b"1\n")},
                               {b"a": ("100644", b"1\n"), b"ours": ("100644", b"o\n")},
                               {b"a": ("100644", b"1\n"), b"dir/theirs": ("100644", b"t\n")})
    merged = assert_merges_like_git(empty, ours, theirs)
    parents = _git(empty, "log", "-1", "--format=%P%n%an <%ae>%n%cn <%ce>%n%ct %at%n%B", merged).stdout.decode()
    assert parents.splitlines()[:4] == [f"{ours} {theirs}", "docket <docket@localhost>", "docket <docket@localhost>",
                                        "1767225602 1767225602"]
    assert parents.splitlines()[4] == MESSAGE.strip()
    assert ref(empty, REF) is None  # no ref is moved by a merge
    fsck(empty)


def test_one_file_changed_in_different_hunks_merges_as_git_would(empty: Path) -> None:
    _, ours, theirs = three(empty, {b"f": ("100644", SEVEN)},
                            {b"f": ("100644", text("A", "b", "c", "d", "e", "f", "g"))},
                            {b"f": ("100644", text("a", "b", "c", "d", "e", "f", "G"))})
    merged = assert_merges_like_git(empty, ours, theirs)
    assert _git(empty, "show", f"{merged}:f").stdout == text("A", "b", "c", "d", "e", "f", "G")
    fsck(empty)


def test_symlinks_executable_bits_and_submodules_survive_a_merge(empty: Path) -> None:
    base = {b"link": ("120000", b"target"), b"tool": ("100755", b"#!/bin/sh\n"), b"sub": ("160000", SUBMODULE.encode()),
            b"f": ("100644", SEVEN), b"g": ("100644", b"g\n")}
    ours = {**base, b"f": ("100644", text("A", "b", "c", "d", "e", "f", "g")), b"g": ("100755", b"g\n"),
            b"new-link": ("120000", b"f")}
    theirs = {**base, b"f": ("100755", SEVEN), b"g": ("100644", b"G\n"), b"sub": ("160000", b"ab" * 20),
              b"tool": ("100755", b"#!/bin/sh\nexit 0\n")}
    _, o, t = three(empty, base, ours, theirs)
    merged = assert_merges_like_git(empty, o, t)
    listing = _git(empty, "ls-tree", merged).stdout.decode()
    assert "100755 blob" in listing.split("\tf\n")[0].splitlines()[-1]  # content from ours, mode from theirs
    assert "100755 blob" in listing.split("\tg\n")[0].splitlines()[-1]  # mode from ours, content from theirs
    assert f"160000 commit {'ab' * 20}\tsub" in listing
    assert "120000 blob" in listing.split("\tlink\n")[0].splitlines()[-1]
    fsck(empty)


def test_a_candidate_ahead_of_head_still_gets_its_own_merge_commit(empty: Path) -> None:
    head = commit(empty, {b"a": ("100644", b"1\n")})
    candidate = commit(empty, {b"a": ("100644", b"2\n")}, head, when=1_767_225_700)
    result = merge_candidate(empty, head, candidate, MESSAGE)
    assert result.state == "merged"
    assert result.tree == _git(empty, "rev-parse", f"{candidate}^{{tree}}").stdout.decode().strip()
    assert _git(empty, "log", "-1", "--format=%P", result.commit).stdout.decode().split() == [head, candidate]


def test_the_same_inputs_give_the_same_merge_commit_in_any_run(tmp_path: Path) -> None:
    made = []
    for name in ("one", "two"):
        path = tmp_path / name
        path.mkdir()
        git(path, "init", "-q", "-b", "main")
        _, ours, theirs = three(path, {b"a": ("100644", b"1\n")}, {b"a": ("100644", b"1\n"), b"b": ("100644", b"b\n")},
                                {b"a": ("100644", b"2\n")})
        first = merge_candidate(path, ours, theirs, MESSAGE)
        again = merge_candidate(path, ours, theirs, MESSAGE)  # after a crash: nothing new
        assert first == again
        made.append(first.commit)
    assert made[0] == made[1]


def test_emptied_trees_merge_into_the_empty_tree(empty: Path) -> None:
    _, ours, theirs = three(empty, {b"a": ("100644", b"1\n"), b"b": ("100644", b"2\n")},
                            {b"b": ("100644", b"2\n")}, {b"a": ("100644", b"1\n")})
    assert_merges_like_git(empty, ours, theirs)
    fsck(empty)


# Conflicts


@pytest.mark.parametrize("ours, theirs, path", [
    ({b"f": ("100644", text("a", "B", "c", "d", "e", "f", "g"))},
     {b"f": ("100644", text("a", "X", "c", "d", "e", "f", "g"))}, "f"),  # the same lines
    ({}, {b"f": ("100644", text("a", "b", "c", "d", "e", "f", "G"))}, "f"),  # deleted against modified
    ({b"f": ("100644", SEVEN), b"d/new": ("100644", b"1\n")},
     {b"f": ("100644", SEVEN), b"d/new": ("100644", b"2\n")}, "d/new"),  # added twice, differently
    ({b"f": ("120000", b"x")}, {b"f": ("120000", b"y")}, "f"),  # a file become two different symlinks
    ({b"f": ("100644", SEVEN), b"bin": ("100644", b"\0a\n")},
     {b"f": ("100644", SEVEN), b"bin": ("100644", b"\0b\n")}, "bin"),  # binary content added twice
])
def test_conflicts_name_their_paths_and_write_nothing(empty: Path, ours: Files, theirs: Files, path: str) -> None:
    _, o, t = three(empty, {b"f": ("100644", SEVEN)}, ours, theirs)
    before = loose_objects(empty)
    result = merge_candidate(empty, o, t, MESSAGE)
    assert (result.state, result.conflicts, result.commit) == ("conflicted", (path,), None)
    assert loose_objects(empty) == before
    assert ref(empty, REF) is None
    assert git_merge_tree(empty, o, t) is None  # git finds a conflict as well (and writes objects of its own)


def test_both_sides_changing_a_submodule_differently_conflict(empty: Path) -> None:
    base = {b"sub": ("160000", SUBMODULE.encode())}
    _, o, t = three(empty, base, {b"sub": ("160000", b"ab" * 20)}, {b"sub": ("160000", b"cd" * 20)})
    assert merge_candidate(empty, o, t, MESSAGE).conflicts == ("sub",)


def test_conflicting_hostile_names_are_quoted_and_sorted(empty: Path) -> None:
    names = [b"new\nline", b'quote"d', b"back\\slash", b"caf\xe9", b"-dash", b"sp ace", b"\xc3\xa9t\xc3\xa9"]
    base = {name: ("100644", b"base\n") for name in names}
    _, o, t = three(empty, base, {n: ("100644", b"ours\n") for n in names}, {n: ("100644", b"theirs\n") for n in names})
    result = merge_candidate(empty, o, t, MESSAGE)
    assert result.conflicts == ('"back\\\\slash"', '"caf\\351"', '"new\\nline"', '"quote\\"d"', "-dash", "sp ace",
                                "été")
    assert list(result.conflicts) == sorted(result.conflicts)


def test_hostile_names_merge_cleanly_as_git_would(empty: Path) -> None:
    names = [b"new\nline", b'quote"d', b"back\\slash", b"caf\xe9", b"-dash", b"d/sp ace"]
    base = {name: ("100644", b"base\n") for name in names}
    _, o, t = three(empty, base, {**base, b"new\nline": ("100644", b"ours\n")},
                    {**base, b"caf\xe9": ("100755", b"theirs\n"), b"d/\x01ctl": ("100644", b"x\n")})
    assert_merges_like_git(empty, o, t)
    fsck(empty)


# Already merged


def test_a_candidate_already_in_head_is_already_merged(empty: Path) -> None:
    candidate = commit(empty, {b"a": ("100644", b"1\n")})
    head = commit(empty, {b"a": ("100644", b"2\n")}, candidate)
    before = loose_objects(empty)
    assert merge_candidate(empty, head, candidate, MESSAGE).state == "already-merged"
    assert merge_candidate(empty, head, head, MESSAGE).commit == head
    assert loose_objects(empty) == before


def test_what_is_no_commit_is_unreadable(empty: Path, tmp_path: Path) -> None:
    head = commit(empty, {b"a": ("100644", b"1\n")})
    assert merge_candidate(empty, head, "0" * 40, MESSAGE).state == "unreadable"
    assert merge_candidate(tmp_path / "nowhere", head, head, MESSAGE).state == "unreadable"


# Trailers


def test_trailers_are_read_back_by_git(empty: Path) -> None:
    _, o, t = three(empty, {b"a": ("100644", b"1\n")}, {b"a": ("100644", b"1\n"), b"b": ("100644", b"b\n")},
                    {b"a": ("100644", b"2\n")})
    block = trailers("run-7k2m9x4q", "t1", "w1", 2, "ab" * 32)
    merged = merge_candidate(empty, o, t, merge_message("docket: merge t1\nsneaky: line", block)).commit
    body = _git(empty, "log", "-1", "--format=%B", merged).stdout
    parsed = _git(empty, "interpret-trailers", "--parse", stdin=body).stdout.decode()
    assert parsed == ("Docket-Run: run-7k2m9x4q\nDocket-Task: t1\nDocket-Worker: w1\nDocket-Generation: 2\n"
                      f"Docket-Candidate: {'ab' * 32}\n")


@pytest.mark.parametrize("worker", ["", " w1", "w1\nDocket-Run: forged", "w\x1b[31m"])
def test_a_value_that_is_no_one_line_trailer_is_refused(worker: str) -> None:
    with pytest.raises(BadInput) as caught:
        trailers("run-1", "t1", worker, 1, "c")
    assert caught.value.code == "bad-trailer"


def test_overlapping_changed_paths_are_found_pairwise() -> None:
    changed = [["a.txt", "src/x.py"], ["b.txt"], ["src"], ["a.txt", "src/x.py/deeper"], ["srcx/y"]]
    assert changed_paths_overlap(changed) == [
        PathOverlap(0, 2, ("src", "src/x.py")), PathOverlap(0, 3, ("a.txt", "src/x.py", "src/x.py/deeper")),
        PathOverlap(2, 3, ("src", "src/x.py/deeper")),
    ]
    assert changed_paths_overlap([["a"], ["b"]]) == []


# Observing and advancing the integration ref


def test_observe_integration_tells_each_state(empty: Path, tmp_path: Path) -> None:
    _, o, t = three(empty, {b"a": ("100644", b"1\n")}, {b"a": ("100644", b"1\n"), b"b": ("100644", b"b\n")},
                    {b"a": ("100644", b"2\n")})
    assert observe_integration(empty, REF, o, t).state == "missing"
    advance_ref(empty, REF, None, o)
    assert (observe_integration(empty, REF, o, t).state, ref(empty, REF)) == ("at-parent", o)
    merged = merge_candidate(empty, o, t, MESSAGE).commit
    advance_ref(empty, REF, o, merged)
    assert observe_integration(empty, REF, o, t) == observe_integration(empty, REF, o, t)
    assert (observe_integration(empty, REF, o, t).state, observe_integration(empty, REF, o, t).commit) == (
        "merged", merged)
    assert observe_integration(empty, REF, t, o).state == "merged"
    advance_ref(empty, REF, merged, t)  # someone else's commit
    assert observe_integration(empty, REF, o, t).state == "diverged"
    git(empty, "update-ref", REF, _git(empty, "rev-parse", f"{o}^{{tree}}").stdout.decode().strip())
    assert observe_integration(empty, REF, o, t).state == "diverged"
    assert observe_integration(tmp_path / "nowhere", REF, o, t).state == "unreadable"
    fsck(empty)


def test_advance_ref_is_compare_and_swap(empty: Path) -> None:
    one = commit(empty, {b"a": ("100644", b"1\n")})
    two, three_ = (commit(empty, {b"a": ("100644", b"2\n")}, one, when=2),
                   commit(empty, {b"a": ("100644", b"3\n")}, one, when=3))
    advance_ref(empty, REF, None, one)
    advance_ref(empty, REF, None, two)  # create-only: the ref is there already
    assert ref(empty, REF) == one
    advance_ref(empty, REF, two, three_)  # it is not at two
    assert ref(empty, REF) == one
    advance_ref(empty, REF, one, "f" * 40)  # no such commit
    assert ref(empty, REF) == one
    advance_ref(empty, REF, one, two)
    assert ref(empty, REF) == two
    advance_ref(empty, "refs/heads/main", None, two)
    advance_ref(empty, "refs/heads/main", one, three_)  # the target moved: left alone
    assert ref(empty, "refs/heads/main") == two
    advance_ref(empty / "nowhere", REF, two, one)
    with pytest.raises(BadInput):
        advance_ref(empty, "refs/docket/bad..name", two, one)
    fsck(empty)


@pytest.mark.parametrize("world", ["real", "fake"])
def test_fake_and_real_ports_walk_one_step_alike(world: str, empty: Path) -> None:
    if world == "real":
        port, repository = DulwichMerges(), empty / ".git"
        _, head, candidate = three(empty, {b"a": ("100644", b"1\n")},
                                   {b"a": ("100644", b"1\n"), b"b": ("100644", b"b\n")}, {b"a": ("100644", b"2\n")})
    else:
        fake = FakeRepository()
        repository, base = empty / ".git", fake.add_commit((), fake.add_tree("base"), "base")
        head, candidate = (fake.add_commit((base,), fake.add_tree(n), n) for n in ("ours", "theirs"))
        port = FakeMerges({repository: fake})
    seen = [port.observe_integration(repository, REF, head, candidate).state]
    port.advance_ref(repository, REF, None, head)
    seen.append(port.observe_integration(repository, REF, head, candidate).state)
    result = port.merge_candidate(repository, head, candidate, MESSAGE)
    assert port.merge_candidate(repository, head, candidate, MESSAGE) == result
    port.advance_ref(repository, REF, candidate, result.commit)  # not there: nothing moves
    seen.append(port.observe_integration(repository, REF, head, candidate).state)
    port.advance_ref(repository, REF, head, result.commit)
    seen.append(port.observe_integration(repository, REF, head, candidate).state)
    assert port.merge_candidate(repository, result.commit, candidate, MESSAGE).state == "already-merged"
    assert seen == ["missing", "at-parent", "at-parent", "merged"]


# Lines that repeat: where alignments differ, docket conflicts rather than guess


def test_a_change_that_could_slide_over_repeated_lines_conflicts(empty: Path) -> None:
    # merge3 alone merges this, but puts the added "b" elsewhere than git does
    _, o, t = three(empty, {b"f": ("100644", text("a", "a", "a", "b", "b", "c"))},
                    {b"f": ("100644", text("a", "a", "a", "b", "b", "b", "c"))},
                    {b"f": ("100644", text("a", "a", "b", "b", "b", "c"))})
    assert merge_candidate(empty, o, t, MESSAGE).conflicts == ("f",)


def test_known_divergence_git_conflicts_where_docket_merges(empty: Path) -> None:
    # git's own alignment here turns one changed line into twelve; docket keeps the three small changes apart
    base = text(*"fegedgehefgdgch")
    _, o, t = three(empty, {b"f": ("100644", base)}, {b"f": ("100644", text(*"fegedgehehgdgch"))},
                    {b"f": ("100644", text(*"fcgedgehefgdgh"))})
    result = merge_candidate(empty, o, t, MESSAGE)
    assert result.state == "merged" and git_merge_tree(empty, o, t) is None
    assert _git(empty, "show", f"{result.commit}:f").stdout == text(*"fcgedgehehgdgh")


def test_a_file_too_different_to_check_conflicts(empty: Path) -> None:
    lines = [f"line {n}" for n in range(1500)]
    _, o, t = three(empty, {b"f": ("100644", text(*lines))},
                    {b"f": ("100644", text(*(f"new {n}" for n in range(1100)), *lines[1100:]))},
                    {b"f": ("100644", text(*lines[:-1], "last"))})
    assert merge_candidate(empty, o, t, MESSAGE).conflicts == ("f",)  # more than 2000 lines added plus removed
    assert git_merge_tree(empty, o, t) is not None


@st.composite
def edited(draw: st.DrawFn, lines: list[str]) -> list[str]:
    """lines with one or two lines inserted, deleted or replaced, as people edit files."""
    lines = list(lines)
    for _ in range(draw(st.integers(1, 2))):
        at = draw(st.integers(0, len(lines)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        if kind == "insert":
            lines[at:at] = draw(st.lists(ALPHABET, min_size=1, max_size=2))
        elif at < len(lines):
            lines[at:at + 1] = [] if kind == "delete" else [draw(ALPHABET)]
    return lines


ALPHABET = st.sampled_from(list("abcdefghijkl"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), base=st.lists(ALPHABET, min_size=3, max_size=16))
def test_a_clean_merge_is_the_tree_git_makes(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject,
                                             base: list[str]) -> None:
    """Whenever docket and git both merge, the trees are equal; docket may conflict where git merges (it is
    stricter), and on rare alignments git conflicts where docket merges (see the known divergence above)."""
    ours, theirs = data.draw(edited(base)), data.draw(edited(base))
    path = tmp_path_factory.mktemp("prop")
    git(path, "init", "-q", "-b", "main")
    _, o, t = three(path, {b"f": ("100644", text(*base))}, {b"f": ("100644", text(*ours))},
                    {b"f": ("100644", text(*theirs))})
    result = merge_candidate(path, o, t, MESSAGE)
    expected = git_merge_tree(path, o, t)
    assert result.state in ("merged", "conflicted")
    if result.state == "merged" and expected is not None:
        assert result.tree == expected


# Histories with several merge bases: the bases are merged into a virtual base first, as git's recursive strategy does


def git_merge_tree_conflicts(repo: Path, ours: str, theirs: str) -> tuple[str | None, tuple[str, ...]]:
    """git's merged tree and no paths, or None and the paths git finds conflicting."""
    result = _git(repo, "merge-tree", "--write-tree", "--name-only", "-z", ours, theirs, check=False)
    assert result.returncode in (0, 1), result.stderr
    tree, _, rest = result.stdout.partition(b"\0")
    if result.returncode == 0:
        return tree.decode(), ()
    names = rest.split(b"\0\0")[0].split(b"\0")  # the conflicted paths, then an empty field, then messages
    return None, tuple(sorted({name.decode() for name in names if name}))


def merges_as_git_does(repo: Path, ours: str, theirs: str) -> MergeResult:
    result = merge_candidate(repo, ours, theirs, MESSAGE)
    tree, conflicts = git_merge_tree_conflicts(repo, ours, theirs)
    if tree is not None:
        assert result.state in ("merged", "already-merged") and result.tree == tree, result
    else:
        assert (result.state, result.conflicts) == ("conflicted", conflicts), result
    return result


def criss_cross(repo: Path, base: Files, left: Files, right: Files, left_merge: Files, right_merge: Files,
                ours: Files, theirs: Files) -> tuple[str, str]:
    """base; left and right on it; each merged into the other (left_merge on [left, right], right_merge on
    [right, left]); ours on left_merge and theirs on right_merge: ours and theirs have two merge bases."""
    b = commit(repo, base, when=1_767_225_600)
    lt, rt = commit(repo, left, b, when=1_767_225_601), commit(repo, right, b, when=1_767_225_602)
    lm, rm = commit(repo, left_merge, lt, rt, when=1_767_225_603), commit(repo, right_merge, rt, lt, when=1_767_225_604)
    return commit(repo, ours, lm, when=1_767_225_605), commit(repo, theirs, rm, when=1_767_225_606)


def test_unrelated_histories_are_unmergeable(empty: Path) -> None:
    one, two = commit(empty, {b"a": ("100644", b"1\n")}), commit(empty, {b"b": ("100644", b"1\n")}, when=2)
    result = merge_candidate(empty, one, two, MESSAGE)
    assert result.state == "unmergeable" and "no merge base" in result.detail


def test_a_criss_cross_history_merges_as_git_does(empty: Path) -> None:
    base = {b"f": ("100644", SEVEN), b"g": ("100644", b"g\n")}
    left = {**base, b"f": ("100644", text("A", "b", "c", "d", "e", "f", "g"))}
    right = {**base, b"g": ("100644", b"G\n")}
    both = {**left, **right, b"f": left[b"f"]}
    ours = {**both, b"new": ("100644", b"n\n")}
    theirs = {**both, b"f": ("100644", text("A", "b", "c", "d", "e", "f", "G"))}
    o, t = criss_cross(empty, base, left, right, both, both, ours, theirs)
    result = merges_as_git_does(empty, o, t)
    assert _git(empty, "show", f"{result.commit}:f").stdout == text("A", "b", "c", "d", "e", "f", "G")
    before = loose_objects(empty)
    assert merge_candidate(empty, o, t, MESSAGE) == result  # after a crash: the same commit, nothing new written
    assert loose_objects(empty) == before
    fsck(empty)


def test_a_conflict_between_the_merge_bases_stays_in_the_virtual_base(empty: Path) -> None:
    # left and right change one line differently; each merge resolves it its own way: ours and theirs conflict
    # there, as in git, and a file only one of them changed since merges cleanly
    base = {b"f": ("100644", SEVEN), b"g": ("100644", b"g\n")}
    left = {**base, b"f": ("100644", text("a", "L", "c", "d", "e", "f", "g"))}
    right = {**base, b"f": ("100644", text("a", "R", "c", "d", "e", "f", "g"))}
    o, t = criss_cross(empty, base, left, right, left, right, {**left, b"g": ("100644", b"G\n")}, right)
    assert merges_as_git_does(empty, o, t).conflicts == ("f",)
    # both resolved it alike and then changed other files: git merges, and so does docket
    resolved = {**base, b"f": ("100644", text("a", "LR", "c", "d", "e", "f", "g"))}
    o, t = criss_cross(empty, base, left, right, resolved, resolved, {**resolved, b"g": ("100644", b"G\n")},
                       {**resolved, b"h": ("100644", b"h\n")})
    merges_as_git_does(empty, o, t)
    # a file deleted on one base and changed on the other: the virtual base keeps the merge base's file
    left, right = {b"g": base[b"g"]}, {**base, b"f": ("100644", text("a", "b", "c", "d", "e", "f", "G"))}
    o, t = criss_cross(empty, base, left, right, left, right, {**left, b"h": ("100644", b"h\n")}, right)
    merges_as_git_does(empty, o, t)


def test_three_merge_bases_are_merged_in_turn(empty: Path) -> None:
    base = {b"f": ("100644", SEVEN)}
    b = commit(empty, base, when=1_767_225_600)
    sides = [{**base, name: ("100644", name + b"\n")} for name in (b"x", b"y", b"z")]
    x, y, z = (commit(empty, files, b, when=1_767_225_601 + n) for n, files in enumerate(sides))
    everything = {**sides[0], **sides[1], **sides[2]}
    ours = commit(empty, {**everything, b"f": ("100644", text("A", "b", "c", "d", "e", "f", "g"))}, x, y, z,
                  when=1_767_225_610)
    theirs = commit(empty, {**everything, b"f": ("100644", text("a", "b", "c", "d", "e", "f", "G"))}, z, y, x,
                    when=1_767_225_611)
    assert len(_git(empty, "merge-base", "--all", ours, theirs).stdout.split()) == 3
    merges_as_git_does(empty, ours, theirs)
    fsck(empty)


PATHS = (b"f", b"g", b"d/h", b"d/i")


Files_ = dict[bytes, list[str]]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[tuple[int, ...], Files_]], tuple[int, int]]:
    """A random history, each commit as its parents (earlier commits' indexes) and its files (path -> lines), and
    the two branch tips to merge. Two or three branches grow from one root in rounds: in each, some branches
    get a commit that edits a file (lines inserted, deleted or replaced, a file added or deleted), then some
    merge another branch's tip as it was before this round's merges (so merges cross: criss-cross histories and
    more merge bases than two come up), taking each file from one side or the other, perhaps editing one. Lines
    are new words, never repeated in a file, so that both git and docket align them one way."""
    fresh = (str(n) for n in itertools.count())

    def words(least: int, most: int) -> list[str]:
        return [next(fresh) for _ in range(draw(st.integers(least, most)))]

    def edit(files: Files_) -> None:
        path = draw(st.sampled_from(PATHS))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "replace", "delete-file"] if path in files
                                    else ["add"]))
        if kind == "add":
            files[path] = words(1, 5)
        elif kind == "delete-file":
            del files[path]
        else:
            lines, at = files[path], draw(st.integers(0, len(files[path])))
            if kind == "insert":
                lines[at:at] = words(1, 2)
            elif at < len(lines):
                lines[at:at + 1] = [] if kind == "delete" else words(1, 1)

    commits: list[tuple[tuple[int, ...], Files_]] = [((), {path: words(4, 9) for path in PATHS[:3]})]
    tips = [0] * draw(st.integers(2, 3))
    for _ in range(draw(st.integers(2, 4))):
        for branch in range(len(tips)):
            if draw(st.booleans()):
                files = {path: list(lines) for path, lines in commits[tips[branch]][1].items()}
                edit(files)
                commits.append(((tips[branch],), files))
                tips[branch] = len(commits) - 1
        before = list(tips)
        for branch in range(len(tips)):
            other = before[(branch + draw(st.integers(1, len(tips) - 1))) % len(tips)]
            if other == tips[branch] or not draw(st.integers(0, 3)):
                continue
            own, theirs = commits[tips[branch]][1], commits[other][1]
            files = {}
            for path in sorted({*own, *theirs}):
                chosen = draw(st.sampled_from((own, theirs)))
                if path in chosen:
                    files[path] = list(chosen[path])
            if draw(st.booleans()):
                edit(files)
            commits.append(((tips[branch], other), files))
            tips[branch] = len(commits) - 1
    ours, theirs = draw(st.lists(st.sampled_from(range(len(tips))), min_size=2, max_size=2, unique=True))
    return commits, (tips[ours], tips[theirs])


def build(repo: Path, history: list[tuple[tuple[int, ...], dict[bytes, list[str]]]]) -> list[str]:
    """The commits of a history, one second apart; each line is prefixed with its file's name, so that no file's
    content resembles another's (git would follow it as a rename; docket does not follow renames)."""
    made: list[str] = []
    for n, (parents, files) in enumerate(history):
        content = {path: ("100644", text(*(f"{path.decode()}:{word}" for word in lines)))
                   for path, lines in files.items()}
        made.append(commit(repo, content, *(made[p] for p in parents), when=1_767_225_600 + n))
    return made


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_random_histories_merge_as_git_does(tmp_path_factory: pytest.TempPathFactory, history: tuple) -> None:
    commits, (ours, theirs) = history
    path = tmp_path_factory.mktemp("history")
    git(path, "init", "-q", "-b", "main")
    made = build(path, commits)
    merges_as_git_does(path, made[ours], made[theirs])


def test_the_same_change_on_both_sides_is_taken_once_as_git_does(empty: Path) -> None:
    # common in criss-cross histories: both sides hold one resolution, and one of them changed more
    _, o, t = three(empty, {b"f": ("100644", SEVEN)}, {b"f": ("100644", text("a", "X", "c", "d", "e", "Y", "g"))},
                    {b"f": ("100644", text("a", "X", "c", "d", "e", "f", "g")), b"g": ("100644", b"g\n")})
    assert _git(empty, "show", f"{merges_as_git_does(empty, o, t).commit}:f").stdout == \
        text("a", "X", "c", "d", "e", "Y", "g")
    # the same change next to a different one still conflicts, as in git
    _, o, t = three(empty, {b"f": ("100644", SEVEN)}, {b"f": ("100644", text("a", "X", "Y", "d", "e", "f", "g"))},
                    {b"f": ("100644", text("a", "X", "c", "d", "e", "f", "g"))})
    merges_as_git_does(empty, o, t)


@st.composite
def unique_lines_three_ways(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    """A base of distinct lines and two edits of it, each inserting, deleting and replacing lines with new ones;
    or both replacing one line with their own new lines around new lines in common (which a conflict must not
    keep, and which git joins into one conflict when they are three lines or fewer)."""
    fresh = (str(n) for n in itertools.count())
    base = [next(fresh) for _ in range(draw(st.integers(2, 10)))]

    def edit(lines: list[str]) -> list[str]:
        lines = list(lines)
        for _ in range(draw(st.integers(1, 3))):
            at, kind = draw(st.integers(0, len(lines))), draw(st.sampled_from(["insert", "delete", "replace"]))
            if kind == "insert":
                lines[at:at] = [next(fresh) for _ in range(draw(st.integers(1, 2)))]
            elif at < len(lines):
                lines[at:at + 1] = [] if kind == "delete" else [next(fresh)]
        return lines

    if draw(st.booleans()):  # both replace the same lines, keeping new lines in common amid their own
        at = draw(st.integers(0, len(base) - 1))
        shared = [next(fresh) for _ in range(draw(st.integers(1, 5)))]
        ours, theirs = ([*base[:at], next(fresh), *shared, next(fresh), *base[at + 1:]] for _ in range(2))
        return base, ours, theirs
    return base, edit(base), edit(base)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(three_ways=unique_lines_three_ways())
def test_a_conflict_in_a_virtual_base_has_the_markers_git_puts_there(tmp_path_factory: pytest.TempPathFactory,
                                                                     three_ways: tuple) -> None:
    """On lines that do not repeat, the content docket keeps in a virtual base for a conflicting file is git's, byte
    for byte (git merge-file makes it with git's merge of the virtual base; one deeper, markers of 9)."""
    from dulwich.objects import Blob

    from docket.adapters.world.git.merge import _with_markers

    path = tmp_path_factory.mktemp("markers")
    for name, lines in zip(("base", "ours", "theirs"), three_ways, strict=True):
        (path / name).write_bytes(text(*lines))
    expected = subprocess.run(["git", "merge-file", "-p", "--marker-size=9", "-L", "Temporary merge branch 1", "-L",
                               "base", "-L", "Temporary merge branch 2", "ours", "base", "theirs"], cwd=path,
                              capture_output=True, check=False).stdout
    assert _with_markers([Blob.from_string(text(*lines)) for lines in three_ways], 9) == expected


# The MergePort's contract: DulwichMerges and FakeMerges alike


@pytest.mark.parametrize("world", ["real", "fake"])
def test_fake_and_real_ports_conflict_alike_and_write_nothing(world: str, empty: Path) -> None:
    repository = empty / ".git"
    if world == "real":
        port = DulwichMerges()
        _, head, candidate = three(empty, {b"f": ("100644", SEVEN)}, {b"f": ("100644", text("a", "B"))},
                                   {b"f": ("100644", text("a", "X"))})
        written = lambda: loose_objects(empty)  # noqa: E731
    else:
        fake = FakeRepository()
        base = fake.add_commit((), fake.add_tree("base"), "base")
        head, candidate = (fake.add_commit((base,), fake.add_tree(n), n) for n in ("ours", "theirs"))
        port = FakeMerges({repository: fake})
        port.merge_conflicts[(head, candidate)] = ("f",)
        written = lambda: dict(fake.objects)  # noqa: E731
    before = written()
    result = port.merge_candidate(repository, head, candidate, MESSAGE)
    assert (result.state, result.conflicts, result.commit) == ("conflicted", ("f",), None)
    assert written() == before
    assert port.observe_integration(repository, REF, head, candidate).state == "missing"  # no ref moved


@pytest.mark.parametrize("world", ["real", "fake"])
def test_fake_and_real_ports_observe_the_target_alike(world: str, empty: Path, tmp_path: Path) -> None:
    repository = empty / ".git"
    if world == "real":
        port = DulwichMerges()
        tip = commit(empty, {b"a": ("100644", b"1\n")})
        _git(empty, "update-ref", "refs/heads/release", tip)
        _git(empty, "update-ref", "refs/heads/main", tip)
    else:
        fake = FakeRepository(main_branch="main")
        tip = fake.point("release")
        fake.branches["main"] = tip
        port = FakeMerges({repository: fake})
    assert port.observe_target(repository, "release").state == "found"
    assert port.observe_target(repository, "release").commit == tip
    assert port.observe_target(repository, "release").checked_out is None
    assert port.observe_target(repository, "main").checked_out == str(empty)  # the main checkout, not the git dir
    assert port.observe_target(repository, "absent").state == "missing"
    assert port.observe_target(tmp_path / "nowhere", "release").state == "unreadable"
    assert port.merge_candidate(repository, tip, "f" * 40, MESSAGE).state == "unreadable"


def test_is_ancestor_agrees_with_git_on_parents_ancestors_siblings_and_itself(empty: Path) -> None:
    """A merge commit's parents are answered without a walk (an integration of a thousand steps walked its whole
    history at each observation); everything else as git's merge-base --is-ancestor says."""
    from docket.adapters.world.git.repository import is_ancestor, open_repo

    a = commit(empty, {b"a": ("100644", b"a")})
    b = commit(empty, {b"b": ("100644", b"b")}, a, when=1_767_225_700)
    side = commit(empty, {b"s": ("100644", b"s")}, a, when=1_767_225_800)
    merged = commit(empty, {b"b": ("100644", b"b"), b"s": ("100644", b"s")}, b, side, when=1_767_225_900)
    later = commit(empty, {b"c": ("100644", b"c")}, merged, when=1_767_226_000)
    with open_repo(empty) as repo:
        for ancestor, descendant in itertools.product([a, b, side, merged, later], repeat=2):
            expected = _git(empty, "merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode == 0
            assert is_ancestor(repo, ancestor, descendant) is expected, (ancestor, descendant)
    (empty / ".git" / "objects" / a[:2] / a[2:]).unlink()  # history beyond the parents unreadable: not walked
    with open_repo(empty) as repo:
        assert is_ancestor(repo, b, merged) and is_ancestor(repo, side, merged)
