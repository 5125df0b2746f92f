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
    """The paths the candidate conflicts on merged onto the predicted head: tip with the commits of the steps
    queued ahead of it and not merged yet (ahead, in order) merged on top, each that merges (one that conflicts
    there will be dropped), all computed in the object store (no ref moved, nothing recorded; a clean merge's
    objects are written and left unreferenced); empty when it merges or cannot be read."""
    head = tip
    for other in ahead:
        merged = merges.merge_candidate(repository, head, other, FORESEEN_MESSAGE)
        if merged.state in ("merged", "already-merged") and merged.commit is not None:
            head = merged.commit
    result = merges.merge_candidate(repository, head, commit, FORESEEN_MESSAGE)
    return list(result.conflicts[:_MAX]) if result.state == "conflicted" else []


def would_queue(queued: Callable[[], list[ev.Event]]) -> bool:
    """Whether deciding now would queue the step (queued: the decision's events): False while it waits for its
    dependencies, is queued already or cannot be (the decision itself says why, when it is made)."""
    try:
        return bool(queued())
    except DocketError:
        return False
