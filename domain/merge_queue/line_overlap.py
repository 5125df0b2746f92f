"""Which paths two candidates change in the same lines: the hunks each made against their common base, compared
range by range. Pure; the hunks are read from git by adapters/world/git/line_changes.py (the merges port's
``changed_lines``).

A hunk is the half-open range ``(start, end)`` of base lines (0-based) that one side replaced; an insertion
replaces none (``start == end``: lines put before base line ``start``). Two hunks touch when fewer than NEAR
unchanged base lines lie between them: git's merge needs one unchanged line between two changes, docket's is
stricter where lines repeat (a blank line between two insertions can be aligned either way: a conflict), and a
warning costs little, so they are compared with git's diff context of three lines (a trial on more-itertools:
two insertions one blank line apart that docket's merge conflicted on were not warned of with no margin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["NEAR", "Hunk", "LineOverlap", "SideHunks", "hunks_touch", "line_overlap", "touching"]

Hunk = tuple[int, int]
# one side's hunks in one path against the common base, in base order: () when that side left the path as the base
# has it; None when it cannot be compared by lines (binary, not a regular file, too large or too different, or no
# common base), so the path is compared as a whole file
SideHunks = tuple[Hunk, ...] | None


NEAR = 3  # unchanged base lines between two hunks that still touch (git's diff context)


def touching(one: Hunk, other: Hunk) -> bool:
    """The two hunks overlap, or fewer than NEAR unchanged base lines lie between them."""
    return one[0] < other[1] + NEAR and other[0] < one[1] + NEAR


def hunks_touch(first: Sequence[Hunk], second: Sequence[Hunk]) -> bool:
    """Any hunk of first touches any of second (each side's hunks in base order)."""
    i = j = 0
    while i < len(first) and j < len(second):
        if touching(first[i], second[j]):
            return True
        if first[i][1] < second[j][1]:  # the one ending first touches nothing after the other's current hunk
            i += 1
        else:
            j += 1
    return False


@dataclass(frozen=True)
class LineOverlap:
    """Where two candidates' changes meet: paths, sorted, each either changed in touching lines by both or (also
    listed in whole_files) changed by both where lines cannot be compared."""

    paths: tuple[str, ...]
    whole_files: tuple[str, ...]


def line_overlap(changes: Mapping[str, tuple[SideHunks, SideHunks]], whole: Sequence[str] = ()) -> LineOverlap | None:
    """The overlap of two candidates from their hunks in the paths both changed (changes: path -> (first's hunks,
    second's)) and the paths that can only be compared as paths (whole: a file against a folder holding another's
    path); None when nothing meets. A side that left a path as the common base has it meets nothing there."""
    lines, whole_files = set(), set(whole)
    for path, (first, second) in changes.items():
        if first == () or second == ():
            continue
        if first is None or second is None:
            whole_files.add(path)
        elif hunks_touch(first, second):
            lines.add(path)
    if not lines and not whole_files:
        return None
    return LineOverlap(tuple(sorted(lines | whole_files)), tuple(sorted(whole_files)))
