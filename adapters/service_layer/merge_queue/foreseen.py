"""Conflicts foreseen as a step is queued (``queue_task``): which earlier steps' changes meet its own, line by line,
and whether it merges onto the integration tip as it stands. Both only warn: the queue merges the step as any other
when its turn comes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ....domain import events as ev
from ....domain.kernel.errors import DocketError
from ....domain.merge_queue.line_overlap import line_overlap
from ....domain.merge_queue.merges import changed_paths_overlap

if TYPE_CHECKING:
    from ..kernel.ports import MergePort

__all__ = ["FORESEEN_MESSAGE", "foreseen_overlaps", "predicted_conflicts", "would_queue"]

FORESEEN_MESSAGE = "docket: merge foreseen at enqueue\n"  # the message of a foreseen merge, never on any ref
_MAX = 1000  # paths a warning names (the events' bound)


def foreseen_overlaps(merges: MergePort, repository: Path, task_id: str, commit: str, changed: Sequence[str],
                      others: Sequence[tuple[str, str, Sequence[str]]]) -> list[ev.PathOverlapWarning]:
    """A warning for each earlier step (others: task, commit, changed paths; one each) whose changes meet the
    candidate's (commit, changed): the paths both change in the same or adjacent lines against the two commits'
    merge base, or as whole files where lines cannot be compared (whole_files). Git is asked only about the paths
    both change."""
    warnings = []
    for other_task, other_commit, paths in others:
        found = changed_paths_overlap([paths, changed])
        if not found:
            continue
        both = set(paths) & set(changed)
        shared = found[0].paths
        lines = merges.changed_lines(repository, other_commit, commit, sorted(p for p in shared if p in both))
        overlap = line_overlap(lines, [p for p in shared if p not in both])  # a file against a folder: as a path
        if overlap is not None:
            warnings.append(ev.PathOverlapWarning(first_task=other_task, second_task=task_id,
                                                  paths=list(overlap.paths[:_MAX]),
                                                  whole_files=list(overlap.whole_files[:_MAX])))
    return warnings


def predicted_conflicts(merges: MergePort, repository: Path, tip: str, commit: str,
                        ahead: Sequence[str] = ()) -> list[str]:
    """The paths the candidate conflicts on merged onto tip, or with a step queued ahead of it and not merged yet
    (ahead: their commits; each merged with the candidate on its own, from their merge base), in that order; empty
    when it merges with all of them or cannot be read. Merges computed, never written: nothing is left in the
    object store."""
    found: list[str] = []
    for onto in (tip, *ahead):
        result = merges.merge_candidate(repository, onto, commit, FORESEEN_MESSAGE, write=False)
        if result.state == "conflicted":
            found += [p for p in result.conflicts if p not in found]
    return found[:_MAX]


def would_queue(queued: Callable[[], list[ev.Event]]) -> bool:
    """Whether deciding now would queue the step (queued: the decision's events): False while it waits for its
    dependencies, is queued already or cannot be (the decision itself says why, when it is made)."""
    try:
        return bool(queued())
    except DocketError:
        return False
