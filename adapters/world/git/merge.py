"""Merging a candidate into a head through dulwich, in the object store (the ref is moved by integration_refs.py).

The tree merge follows git's three-way rules entry by entry, so that mode,
symlink and submodule (gitlink) entries come through as git would merge them;
file contents that both sides changed are merged by dulwich's ``merge_blobs``
(merge3), kept only when two more alignments of the lines (shortest edit
scripts, as git's diff makes) give the same result and no change could slide
over repeated lines into the other side's (``_unambiguous``). A history with
several merge bases (criss-cross: a task that depends on two others, merged
after both) is merged as git's recursive strategy (ort) merges it: the merge
bases, oldest first, are merged in turn into a virtual base (recursively, with
their own merge bases), where a conflict keeps what git keeps (the base's
entry, or the content with conflict markers), and the two sides are merged
against that. The same change on both sides is taken once. Stricter than
git where the two differ: renames are not followed (a rename on one side and
an edit on the other is a modify/delete conflict), binary files (a NUL byte in
the first 8000) and symlinks changed on both sides conflict, ``.gitattributes``
merge drivers are never run (an integration runs no command the repository
configures). The known way to be looser: git's own line alignment occasionally
sees a conflict in small changes that docket keeps apart
(tests/integration/test_merge.py). Inside a virtual base, where docket may
differ from git either way: a file against a folder keeps the base's entry
(git keeps the folder and moves the file aside), conflict markers follow
merge3's alignment of the lines (git's own wherever no line repeats) with LF
line ends, and merge bases with equal commit times are merged in dulwich's
order.
"""

from __future__ import annotations

import stat
import zlib
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path

from ....domain.binding import quote_path
from ....domain.effects import MergeResult
from .ids import object_id
from .repository import commit_of, is_ancestor, open_repo
from .objects import add_object
import difflib

__all__ = ["MERGE_IDENTITY", "merge_candidate"]

MERGE_IDENTITY = b"docket <docket@localhost>"
_GITLINK = 0o160000
_BINARY_SNIFF = 8000
_MAX_EDITS = 2000  # lines added plus removed in one file changed on both sides, beyond which it conflicts  # git's buffer_is_binary looks this far for a NUL byte


def merge_candidate(repository: Path, head: str, candidate_commit: str, message: str, *,
                    write: bool = True) -> MergeResult:
    """Merge candidate_commit into head in the object store; no ref is moved.

    merged: a two-parent merge commit [head, candidate] of the merged tree, also
    when head is an ancestor of the candidate (the integration keeps one merge
    commit, with its trailers, per step; never a fast-forward). Its author and
    committer are ``docket <docket@localhost>`` at the later of the two
    parents' commit times, UTC, so the same inputs always give the same commit
    id (merging again after a crash writes nothing new). already-merged: the
    candidate is head or one of its ancestors; nothing is written. conflicted,
    unmergeable: nothing is written (see MergeResult). With write False a clean
    merge is computed and nothing written either (a merge foreseen, not made:
    no object is left unreferenced). Never raises for a state of the world;
    OSError for real I/O failures while writing.
    """
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return MergeResult("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        return _merge(repo, head, candidate_commit, message, write)


def _merge(repo, head: str, candidate: str, message: str, write: bool = True) -> MergeResult:  # noqa: ANN001
    from dulwich.objects import Commit, Tree

    ours, theirs = commit_of(repo, head), commit_of(repo, candidate)
    if ours is None or theirs is None:
        missing = head if ours is None else candidate
        return MergeResult("unreadable", detail=f"{missing} is not a commit in the repository")
    if is_ancestor(repo, candidate, head):
        return MergeResult("already-merged", commit=head, tree=ours.tree.decode("ascii"))
    try:
        bases = _merge_bases(repo, ours.id, theirs.id)
        if not bases:
            return MergeResult("unmergeable", detail=f"{head} and {candidate} have no merge base (unrelated histories)")
        made: dict = {}
        merge = _TreeMerge(repo.object_store, made, depth=0)
        tree = merge.trees(_merged_bases(repo, bases, made, depth=1), ours.tree, theirs.tree, b"")
    except KeyError as e:
        return MergeResult("unreadable",
                           detail=f"an object of {head}, {candidate} or their merge bases is missing: {e}")
    if tree is None:  # both sides emptied the tree
        merge.written.append(Tree())
        tree = merge.written[-1].id
    if merge.conflicts:
        return MergeResult("conflicted", conflicts=tuple(sorted(quote_path(p) for p in merge.conflicts)))
    commit = Commit()
    commit.tree = tree
    commit.parents = [ours.id, theirs.id]
    commit.author = commit.committer = MERGE_IDENTITY
    commit.author_time = commit.commit_time = max(ours.commit_time, theirs.commit_time)
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = message.encode("utf-8") if message.endswith("\n") else (message + "\n").encode("utf-8")
    for obj in [*merge.written, commit] if write else []:  # the virtual merge base's own objects: none is stored
        add_object(repo.object_store, obj)
    return MergeResult("merged", commit=commit.id.decode("ascii"), tree=tree.decode("ascii"))


@dataclass(frozen=True)
class _Virtual:
    """The merge of several merge bases, a commit that exists only in memory (git's "merged tree")."""

    tree: bytes | None
    parents: tuple[bytes | _Virtual, ...]


def _merge_bases(repo, one: bytes | _Virtual, other: bytes) -> list[bytes]:  # noqa: ANN001
    """The merge bases of one (perhaps virtual) and other: the common ancestors no other common ancestor descends
    from, oldest first, the order git merges them in (by commit time)."""
    from dulwich.graph import can_fast_forward, find_merge_base

    found: Sequence[bytes]
    if isinstance(one, _Virtual):  # never itself an ancestor of other: its bases are those of its parents
        found = [base for parent in one.parents for base in _merge_bases(repo, parent, other)]
    else:
        found = find_merge_base(repo, [object_id(one), object_id(other)])
    bases: list[bytes] = []
    for base in found:
        if base not in bases and not any(later != base and can_fast_forward(repo, object_id(base), object_id(later))
                                         for later in found):
            bases.append(base)
    return sorted(bases, key=lambda sha: repo[sha].commit_time)


def _merged_bases(repo, bases: list[bytes], made: dict, depth: int) -> bytes | None:  # noqa: ANN001
    """The tree to merge against, as git's recursive strategy makes it: the one merge base's tree, or the merge of
    the merge bases, each merged in turn into the merge of those before it (with their own merge bases, found the
    same way, one level deeper). Conflicts inside it are resolved as git resolves them in a virtual base."""
    merged: bytes | _Virtual = bases[0]
    for base in bases[1:]:
        inner = _merge_bases(repo, merged, base)
        tree = _TreeMerge(repo.object_store, made, depth).trees(
            _merged_bases(repo, inner, made, depth + 1) if inner else None, _tree_of(repo, merged),
            _tree_of(repo, base), b"")
        merged = _Virtual(tree, (merged, base))
    return _tree_of(repo, merged)


def _tree_of(repo, node: bytes | _Virtual) -> bytes | None:  # noqa: ANN001
    return node.tree if isinstance(node, _Virtual) else repo[node].tree


@dataclass(frozen=True)
class _Entry:
    mode: int
    sha: bytes

    @property
    def is_tree(self) -> bool:
        return stat.S_ISDIR(self.mode)


class _TreeMerge:
    """A three-way merge of trees, entry by entry; new objects are collected in written (and in made, shared by the
    merges of one merge_candidate, where they are read back), never stored.

    depth 0 is the merge asked for: what does not merge is listed in conflicts. A deeper one makes a virtual merge
    base, as git does: it never conflicts, but keeps for each conflict what git keeps there (the merge base's
    entry, or the content with conflict markers 2 * depth characters longer than git's usual 7).
    """

    def __init__(self, store, made: dict, depth: int) -> None:  # noqa: ANN001
        self.store, self.made, self.depth = store, made, depth
        self.written: list = []
        self.conflicts: list[bytes] = []

    def trees(self, base: bytes | None, ours: bytes | None, theirs: bytes | None, prefix: bytes) -> bytes | None:
        """The merged tree's id (None when it is empty), conflicts appended to self.conflicts."""
        from dulwich.objects import Tree

        sides = [self._entries(sha) for sha in (base, ours, theirs)]
        merged = Tree()
        for name in sorted(set().union(*sides)):
            path = prefix + b"/" + name if prefix else name
            entry = self._entry(path, *(side.get(name) for side in sides))
            if entry is not None:
                merged.add(name, entry.mode, object_id(entry.sha))
        if not merged.items():
            return None
        return self._write(merged)

    def _read(self, sha: bytes):  # noqa: ANN202
        return self.made[sha] if sha in self.made else self.store[sha]

    def _write(self, obj) -> bytes:  # noqa: ANN001
        self.written.append(obj)
        self.made[obj.id] = obj
        return obj.id

    def _entries(self, sha: bytes | None) -> dict[bytes, _Entry]:
        if sha is None:
            return {}
        return {e.path: _Entry(e.mode, e.sha) for e in self._read(sha).items()}

    def _entry(self, path: bytes, base: _Entry | None, ours: _Entry | None, theirs: _Entry | None) -> _Entry | None:
        if ours == theirs:
            return ours
        if base == ours:
            return theirs
        if base == theirs:
            return ours
        # Both sides changed the entry, differently.
        present = [e for e in (base, ours, theirs) if e is not None]
        if all(e.is_tree for e in present):  # a folder on every side that has it: merge what is inside
            sha = self.trees(_sha(base), _sha(ours), _sha(theirs), path)
            return _Entry(stat.S_IFDIR, sha) if sha is not None else None
        if ours is None or theirs is None or ours.is_tree or theirs.is_tree:
            return self._conflict(path, base)  # modify/delete, or a file against a folder
        kinds = {stat.S_IFMT(e.mode) for e in present}
        if len(kinds) != 1 or not stat.S_ISREG(ours.mode):  # a type change, a symlink or a submodule
            return self._conflict(path, base)
        mode = _pick(base.mode if base else None, ours.mode, theirs.mode)
        sha = _pick(base.sha if base else None, ours.sha, theirs.sha)
        if mode is None:
            if not self.depth:
                return self._conflict(path, base)
            mode = ours.mode  # git's virtual base keeps the first side's mode
        if sha is None:
            sha = self._merge_blobs(path, base, ours, theirs)
            if sha is None:
                return None
        return _Entry(mode, sha)

    def _merge_blobs(self, path: bytes, base: _Entry | None, ours: _Entry, theirs: _Entry) -> bytes | None:
        from dulwich.merge import merge_blobs
        from dulwich.objects import Blob

        try:
            blobs = [self._read(e.sha) if e is not None else None for e in (base, ours, theirs)]
        except zlib.error as e:
            from .blobs import is_too_large_to_read

            if not is_too_large_to_read(e):
                raise
            return self._conflicted_blob(path, base)  # too large to merge line by line: as a binary file, a conflict
        if any(b"\0" in blob.data[:_BINARY_SNIFF] for blob in blobs if blob is not None):
            if self.depth:  # git's virtual base keeps the merge base's content of a binary file
                return self._write(Blob.from_string(blobs[0].data if blobs[0] is not None else b""))
            return self._conflicted_blob(path, base)
        content, conflicted = merge_blobs(*blobs)
        if self.depth:
            if conflicted:
                content = _with_markers(blobs, 7 + 2 * self.depth)
        elif conflicted or not _unambiguous(blobs, content):
            return self._conflicted_blob(path, base)
        return self._write(Blob.from_string(content))

    def _conflicted_blob(self, path: bytes, base: _Entry | None) -> bytes | None:
        """_conflict's answer for a file's content: the base's blob in a virtual merge base, else nothing."""
        kept = self._conflict(path, base)
        return kept.sha if kept is not None else None

    def _conflict(self, path: bytes, base: _Entry | None) -> _Entry | None:
        """Nothing, the path listed as a conflict; in a virtual merge base, the base's file (git's choice there)."""
        if self.depth:
            return base if base is not None and not base.is_tree else None
        self.conflicts.append(path)
        return None


def _with_markers(blobs, size: int) -> bytes:  # noqa: ANN001
    """The merge of the three blobs with each conflict between git's markers, as git leaves it in a virtual merge
    base (sides "Temporary merge branch 1" and "2", a missing last newline added before a marker). As git's
    zealous merge does, the lines both sides of a conflict share are taken out of it (the conflict split around
    them), then conflicts at most three unchanged lines apart are joined into one."""
    from merge3 import Merge3

    base, ours, theirs = (blob.data.splitlines(True) if blob is not None else [] for blob in blobs)
    chunks: list[list] = []  # ["plain", lines] (unchanged or taken), ["conflict", ours, theirs]

    def add(kind: str, *sides: list[bytes]) -> None:
        if kind == "conflict" and len(chunks) > 1 and chunks[-1][0] == "unchanged" and len(chunks[-1][1]) <= 3 \
                and chunks[-2][0] == "conflict":
            between = chunks.pop()[1]
            chunks[-1] = ["conflict", chunks[-1][1] + between + sides[0], chunks[-1][2] + between + sides[1]]
        elif kind == "unchanged" and chunks and chunks[-1][0] == "unchanged":
            chunks[-1][1] += sides[0]
        else:
            chunks.append([kind, *sides])

    for group in Merge3(base, ours, theirs).merge_groups():
        if group[0] != "conflict":
            add("unchanged" if group[0] == "unchanged" else "taken", list(group[1]))
            continue
        one, two = list(group[2]), list(group[3])
        blocks = [(len(one), len(two), 0)]  # one conflict, unless both sides have lines
        if one and two:
            try:
                blocks = _ShortestEdits(None, one, two).get_matching_blocks()
            except _TooDifferent:
                pass
        i = j = 0
        for bi, bj, n in blocks:
            if (i, j) != (bi, bj):
                add("conflict", one[i:bi], two[j:bj])
            if n:
                add("unchanged", one[bi:bi + n])
            i, j = bi + n, bj + n
    out: list[bytes] = []
    for chunk in chunks:
        if chunk[0] != "conflict":
            out.extend(chunk[1])
            continue
        for marker, lines in ((b"<" * size + b" Temporary merge branch 1\n", chunk[1]),
                              (b"=" * size + b"\n", chunk[2])):
            out.append(marker)
            out.extend(lines)
            if lines and not lines[-1].endswith(b"\n"):
                out.append(b"\n")
        out.append(b">" * size + b" Temporary merge branch 2\n")
    return b"".join(out)


def _unambiguous(blobs, merged: bytes) -> bool:  # noqa: ANN001
    """Whether the clean merge is one every alignment agrees on: under three alignments of the lines (difflib's, and
    shortest edit scripts matching repeated lines first to first and last to last, as git's Myers diff may), the
    two sides' changes stay apart even where a change could slide over repeated lines (or are the same change, which
    git takes once), and merge3 merges them into merged every time.

    merge3 aligns lines with difflib, which can line up repeated lines where
    git's diff does not, and so merge cleanly what git calls a conflict, or
    put a repeated line elsewhere.
    """

    from merge3 import Merge3

    base, ours, theirs = (blob.data.splitlines(True) if blob is not None else [] for blob in blobs)
    try:
        for matcher in (difflib.SequenceMatcher, _ShortestEdits, _ShortestEditsFromTheEnd):
            ours_spans, theirs_spans = (_spans(base, side, matcher(None, base, side).get_matching_blocks())
                                        for side in (ours, theirs))
            if any(lo <= other_hi and other_lo <= hi and change != other_change  # the same change twice is one
                   for lo, hi, change in ours_spans for other_lo, other_hi, other_change in theirs_spans):
                return False
            out: list[bytes] = []
            # merge3's protocol asks for all of difflib's matcher; it calls get_matching_blocks only
            for group in Merge3(base, ours, theirs, sequence_matcher=matcher).merge_groups():  # type: ignore[arg-type]
                if group[0] == "conflict":
                    return False
                out.extend(group[1])
            if b"".join(out) != merged:
                return False
    except _TooDifferent:
        return False
    return True


def _spans(base: list[bytes], side: list[bytes], blocks) -> list[tuple[int, int, tuple]]:  # noqa: ANN001
    """The base lines each change from base to side may cover, as closed (first, last) boundaries: the lines it
    replaces, widened as far as its removed or added lines could slide over equal neighbours; and the change (the
    base lines it replaces, and with what)."""
    spans, i, j = [], 0, 0
    for bi, bj, size in blocks:
        if (i, j) != (bi, bj):
            lo, hi = i, bi
            removed, added = base[i:bi], side[j:bj]
            while lo > 0 and ((removed and base[lo - 1] == removed[-1]) or (added and base[lo - 1] == added[-1])):
                removed, added = ([base[lo - 1]] + removed[:-1] if removed else removed,
                                  [base[lo - 1]] + added[:-1] if added else added)
                lo -= 1
            removed, added = base[i:bi], side[j:bj]
            while hi < len(base) and ((removed and base[hi] == removed[0]) or (added and base[hi] == added[0])):
                removed, added = (removed[1:] + [base[hi]] if removed else removed,
                                  added[1:] + [base[hi]] if added else added)
                hi += 1
            spans.append((lo, hi, (i, bi, tuple(side[j:bj]))))
        i, j = bi + size, bj + size
    return spans


class _TooDifferent(Exception):
    """More edits than _MAX_EDITS: the file is treated as a conflict rather than checked at quadratic cost."""


class _ShortestEdits:
    """A difflib-style matcher whose matching blocks come from a shortest edit script (Myers, 1986)."""

    def __init__(self, isjunk, a, b) -> None:  # noqa: ANN001
        self.a, self.b = a, b

    def get_matching_blocks(self) -> list[tuple[int, int, int]]:
        a, b = self.a, self.b
        n, m = len(a), len(b)
        v, trace = {1: 0}, []
        for d in range(n + m + 1):
            if d > _MAX_EDITS:
                raise _TooDifferent
            trace.append(dict(v))
            for k in range(-d, d + 1, 2):
                x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
                y = x - k
                while x < n and y < m and a[x] == b[y]:
                    x, y = x + 1, y + 1
                v[k] = x
                if x >= n and y >= m:
                    return self._blocks(trace, d, n, m)
        raise AssertionError("a shortest edit script is at most n + m long")

    def _blocks(self, trace: list[dict[int, int]], d: int, x: int, y: int) -> list[tuple[int, int, int]]:
        pairs = []
        for step in range(d, -1, -1):
            v, k = trace[step], x - y
            if step == 0:
                prev_x = prev_y = 0
            else:
                prev_k = k + 1 if k == -step or (k != step and v[k - 1] < v[k + 1]) else k - 1
                prev_x = v[prev_k]
                prev_y = prev_x - prev_k
            while x > prev_x and y > prev_y:
                x, y = x - 1, y - 1
                pairs.append((x, y))
            x, y = prev_x, prev_y
        blocks: list[list[int]] = []
        for i, j in reversed(pairs):
            if blocks and blocks[-1][0] + blocks[-1][2] == i and blocks[-1][1] + blocks[-1][2] == j:
                blocks[-1][2] += 1
            else:
                blocks.append([i, j, 1])
        return [(i, j, size) for i, j, size in blocks] + [(len(self.a), len(self.b), 0)]


class _ShortestEditsFromTheEnd(_ShortestEdits):
    """The same, found on both sequences reversed: where lines repeat, it matches the last ones first."""

    def get_matching_blocks(self) -> list[tuple[int, int, int]]:
        forward = _ShortestEdits(None, self.a[::-1], self.b[::-1]).get_matching_blocks()[:-1]
        n, m = len(self.a), len(self.b)
        return [(n - i - size, m - j - size, size) for i, j, size in reversed(forward)] + [(n, m, 0)]


def _sha(entry: _Entry | None) -> bytes | None:
    return entry.sha if entry is not None else None


def _pick(base, ours, theirs):  # noqa: ANN001, ANN202
    """The three-way choice for one attribute: the side that changed it; None when both changed it differently."""
    if ours == theirs or base == theirs:
        return ours
    if base == ours:
        return theirs
    return None
