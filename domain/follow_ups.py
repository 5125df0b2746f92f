"""A follow-up task a worker proposed, added to its run while it works. Pure.

The run's [inbox] proposals policy accepts a proposal at once, refuses it, or queues it for a person, who accepts or
refuses it (FollowUpDecided, domain.requests.decide_follow_up). An accepted proposal becomes a task of the run (RunTaskAdded, then TaskPlanned with
its prompt by digest), after the run's own tasks: it depends on the task that proposed it (a follow-up starts from
that task's delivered work) and on the tasks the proposal named. What agents can add is bounded: at most
MAX_ADDED follow-ups per run, never more tasks than a plan may hold.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from . import events as ev
from .aggregate import next_event
from .kernel.errors import BadInput, Refused
from .plan import ledger_task_id
from .run import Run, require_open
from .kernel.streams import run_stream, task_stream
from .kernel.codes import Code

__all__ = ["CHOICES", "MAX_ADDED", "added_task", "choice_of", "dependencies"]

MAX_ADDED = 100
MAX_TASKS = 1000  # RunPlanned's own limit
CHOICES = ("accept", "refuse")


def dependencies(run: Run, proposer: str, named: Sequence[str]) -> tuple[str, ...]:
    """The tasks the follow-up depends on: the proposer, then each task named (by its id in the tasks file, or in
    the ledger). Refused ``follow-up-refused`` when it cannot be added: the run has no plan, too many follow-ups,
    or a name that is no task of the run."""
    if run.plan is None:
        raise Refused(Code.FOLLOW_UP_REFUSED, f"run {run.run_id} has no plan ('docket go' plans one): no task can be "
                                           "added to it")
    if run.plan.added >= MAX_ADDED or len(run.plan.tasks) >= MAX_TASKS:
        raise Refused(Code.FOLLOW_UP_REFUSED, f"run {run.run_id} has {run.plan.added} follow-up task(s) and "
                                           f"{len(run.plan.tasks)} in all, the most it may")
    known = set(run.plan.task_ids)
    found = [proposer]
    for name in named:
        task_id = ledger_task_id(run.run_id, name) if ledger_task_id(run.run_id, name) in known else name
        if task_id not in known:
            raise Refused(Code.FOLLOW_UP_REFUSED, f"the follow-up depends on {name[:128]!r}, which is no task of run "
                                               f"{run.run_id}")
        if task_id not in found:
            found.append(task_id)
    return tuple(found)


def added_task(run: Run, request_key: str, proposer: str, title: str, prompt: str, depends_on: Sequence[str],
               now: str, *, proposal_sha256: str) -> tuple[str, list[ev.Event]]:
    """The follow-up's task id and what adds it to the run: RunTaskAdded, then its TaskPlanned (its prompt by
    digest: the caller stores the prompt's text beside the ledger). The same follow-up proposed again by the same
    task (a later generation redoing its work) is the task added the first time: nothing is added."""
    require_open(run)
    if run.plan is not None:
        for by, digest, task_id in run.plan.follow_ups:
            if (by, digest) == (proposer, proposal_sha256):
                return task_id, []
    deps = dependencies(run, proposer, depends_on)
    assert run.plan is not None
    task_id = ledger_task_id(run.run_id, f"follow-{run.plan.added + 1}")
    added = next_event(ev.RunTaskAdded, run_stream(run.run_id), run.version, now, run_id=run.run_id,
                       task=ev.PlannedTask(task_id=task_id, depends_on=list(deps)), request_key=request_key,
                       proposed_by=proposer, proposal_sha256=proposal_sha256)
    planned = next_event(ev.TaskPlannedV2, task_stream(task_id), 0, now, task_id=task_id, run_id=run.run_id,
                         title=title, prompt_sha256=hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
                         prompt_chars=len(prompt))
    return task_id, [added, planned]


def choice_of(text: str | None, choice: int | None) -> bool:
    """Whether a person's answer to a proposal accepts it: choice 1 or "accept"; choice 2 or "refuse"."""
    if choice is not None:
        if not 1 <= choice <= len(CHOICES):
            raise BadInput(Code.NO_SUCH_CHOICE, "a proposed follow-up offers choices 1 (accept) and 2 (refuse)")
        picked = CHOICES[choice - 1]
        if text is not None and text.strip().lower() != picked:
            raise BadInput(Code.ANSWER_AND_CHOICE, "give the answer's text or a choice, not both")
        return picked == "accept"
    if text is None or text.strip().lower() not in CHOICES:
        raise BadInput(Code.BAD_ANSWER, "a proposed follow-up is answered accept or refuse (or --choice 1 or 2)")
    return text.strip().lower() == "accept"
