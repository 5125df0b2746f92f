"""Which paths two candidates change in the same lines (domain/merge_queue/line_overlap.py): hunks are half-open
ranges of base lines, an insertion empty; touching means overlapping, or fewer than NEAR (3, git's diff context)
unchanged base lines between them."""

from __future__ import annotations

import pytest

from docket.domain.merge_queue.line_overlap import LineOverlap, hunks_touch, line_overlap, touching


@pytest.mark.parametrize(("one", "other", "touch"), [
    ((2, 5), (3, 4), True),    # one inside the other
    ((2, 5), (4, 8), True),    # overlapping
    ((2, 5), (5, 7), True),    # adjacent: no unchanged line between
    ((2, 5), (6, 7), True),    # one unchanged line (5) between: git merges them, docket's merge may not
    ((2, 5), (7, 8), True),    # two unchanged lines between
    ((2, 5), (8, 9), False),   # three: git's diff context, apart
    ((5, 5), (5, 7), True),    # an insertion where the other begins
    ((7, 7), (5, 7), True),    # an insertion where the other ends
    ((4, 4), (5, 7), True),    # an insertion a line before
    ((1, 1), (5, 7), False),   # an insertion four lines before
    ((3, 3), (3, 3), True),    # two insertions at the same place
    ((3, 3), (4, 4), True),    # two insertions a (blank, say) line apart: the more-itertools trial's pair
    ((3, 3), (6, 6), False),   # three lines apart
    ((0, 100), (99, 100), True),
])
def test_two_hunks_touch_when_they_overlap_or_meet(one, other, touch) -> None:
    assert touching(one, other) is touch
    assert touching(other, one) is touch


@pytest.mark.parametrize(("first", "second", "touch"), [
    ([], [(1, 2)], False),
    ([(0, 1), (10, 12), (40, 41)], [(4, 5), (20, 22), (50, 50)], False),   # interleaved, always apart
    ([(0, 1), (10, 12), (40, 41)], [(3, 4), (20, 22), (41, 41)], True),    # the last ones meet
    ([(30, 31)], [(0, 1), (5, 6), (30, 30)], True),                        # found past earlier hunks of the other
    ([(0, 10)], [(13, 14)], False),
    ([(0, 10)], [(12, 13)], True),
])
def test_hunks_touch_when_any_pair_does(first, second, touch) -> None:
    assert hunks_touch(first, second) is touch
    assert hunks_touch(second, first) is touch


@pytest.mark.parametrize(("changes", "whole", "expected"), [
    # far apart in one file: no warning
    ({"big.py": (((2, 3),), ((400, 402),))}, (), None),
    # the same lines: one warning, compared by lines
    ({"big.py": (((2, 3),), ((2, 4),))}, (), LineOverlap(("big.py",), ())),
    # a binary (or otherwise not comparable) file both change: as a whole file
    ({"logo.png": (None, None)}, (), LineOverlap(("logo.png",), ("logo.png",))),
    ({"logo.png": (((0, 1),), None)}, (), LineOverlap(("logo.png",), ("logo.png",))),
    # a side that has the path as the base has it (the other's change already in its history) meets nothing
    ({"big.py": ((), ((2, 3),)), "logo.png": ((), None)}, (), None),
    # a file against a folder holding the other's path: named as the caller found it
    ({}, ("src", "src/a.py"), LineOverlap(("src", "src/a.py"), ("src", "src/a.py"))),
    # several paths, sorted; only those that meet
    ({"b.py": (((1, 2),), ((1, 2),)), "a.py": (((1, 2),), ((9, 9),)), "c.bin": (None, ((0, 0),))}, (),
     LineOverlap(("b.py", "c.bin"), ("c.bin",))),
])
def test_line_overlap_names_the_paths_that_meet(changes, whole, expected) -> None:
    assert line_overlap(changes, whole) == expected
