"""Merge commits of an integration: the trailers they carry, and which candidates touch the same paths. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..kernel.errors import BadInput
from ..kernel.codes import Code

__all__ = ["TRAILER_NAMES", "PathOverlap", "changed_paths_overlap", "merge_message", "trailers"]

TRAILER_NAMES = ("Docket-Run", "Docket-Task", "Docket-Worker", "Docket-Generation", "Docket-Candidate")


def trailers(run: str, task: str, worker: str, generation: int, candidate: str) -> str:
    """The trailer block of a merge commit, one ``Name: value`` line each in TRAILER_NAMES order, newline-ended.

    BadInput ``bad-trailer`` for a value git could not read back as one trailer:
    empty, with surrounding blanks, or holding a control character.
    """
    values = (run, task, worker, str(generation), candidate)
    for name, value in zip(TRAILER_NAMES, values):
        if not value or value != value.strip() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise BadInput(Code.BAD_TRAILER, f"{name} value {value!r} cannot be a one-line trailer")
    return "".join(f"{name}: {value}\n" for name, value in zip(TRAILER_NAMES, values))


def merge_message(subject: str, trailer_block: str) -> str:
    """A merge commit's message: the subject line, a blank line, then the trailers (the last paragraph, as git
    expects). The subject is cut at its first line break, so it cannot add a paragraph of its own."""
    first = subject.splitlines()[0].strip() if subject.strip() else "docket: merge"
    return f"{first}\n\n{trailer_block}"


def _folders(path: str) -> list[str]:
    """The folders holding path: ``a/b/c`` is in ``a/b`` and ``a``."""
    return [path.rsplit("/", n)[0] for n in range(1, path.count("/") + 1)]


@dataclass(frozen=True)
class PathOverlap:
    """Two candidates (by their place in the order given) that change the same paths, or a path and a folder
    holding another's path; paths: those paths, sorted."""

    first: int
    second: int
    paths: tuple[str, ...]


def changed_paths_overlap(changed: Sequence[Sequence[str]]) -> list[PathOverlap]:
    """Every pair of candidates whose changed paths overlap, in order: the same path, or one's path a folder that
    holds the other's (``a`` and ``a/b``: both are named). Paths are slash-separated and relative, as candidates
    record them."""
    paths = [set(each) for each in changed]
    folders = [{folder: p for p in each for folder in _folders(p)} for each in paths]  # folder -> a path inside it
    overlaps = []
    for i in range(len(paths)):
        for j in range(i + 1, len(paths)):
            shared = paths[i] & paths[j]
            for outer, inner in ((i, j), (j, i)):
                for path in paths[outer] & folders[inner].keys():
                    shared |= {path} | {p for p in paths[inner] if path in _folders(p)}
            if shared:
                overlaps.append(PathOverlap(i, j, tuple(sorted(shared))))
    return overlaps
