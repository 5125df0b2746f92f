"""The Task aggregate: one unit of work planned inside an open run, with its prompt and its own worktree.

The worktree is made through an intent (WorktreeRequested) whose outcome is
WorktreeCreated (made now, or found already made) or WorktreeFailed (something
else is there). ``decide_worktree`` chooses that outcome from what the git port
observed; ``prepare`` records that its setup ran.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from . import events as ev
from .aggregate import next_event
from .kernel.errors import Refused
from .kernel.names import task_branch
from .run import Run, require_open
from .kernel.streams import task_stream as stream_of
from .kernel.codes import Code

if TYPE_CHECKING:
    from .candidate import TestsReported
    from .effects import Act, Unknown, WorktreeObservation

__all__ = ["Answered", "Feedback", "answer_note", "answered_prompt", "record_answered", "RemovalObservation", "Task", "apply", "check_feedback", "decide_removal", "decide_worktree",
           "finish", "lose_worktree", "plan", "prepared", "record_feedback", "request_removal", "request_worktree", "retry_prompt",
           "stream_of"]

MAX_FEEDBACK_CHARS = 4000
MAX_ANSWERS_SHOWN = 10


@dataclass(frozen=True)
class Feedback:
    """Why one generation's work failed (TaskFeedbackRecorded)."""

    generation: int
    code: str
    check: str | None
    binding_id: str | None
    feedback: str


@dataclass(frozen=True)
class Answered:
    """A generation that ended waiting for answers, and the questions and answers its successor is told
    (TaskAnswered)."""

    generation: int
    note: str


@dataclass(frozen=True)
class Task:
    task_id: str
    run_id: str
    title: str
    version: int
    prompt_sha256: str | None = None
    worktree: str | None = None  # its path, once made
    branch: str | None = None
    worktree_intent: str | None = None  # the pending WorktreeRequested, if any
    worktree_failure: str | None = None  # code of the last WorktreeFailed
    prepared: bool = False  # setup ran and includes were copied (WorktreePrepared)
    setup_failure: str | None = None
    removal_intent: str | None = None  # the pending WorktreeRemovalRequested, if any
    removal_failure: str | None = None
    removed: str | None = None  # the path of a worktree removed (its content preserved elsewhere)
    base: str | None = None  # the commit its worktree was asked for at
    repository: str | None = None  # the git common dir its worktree was asked for in (its workspace borrows from it)
    worktree_host: str | None = None  # the host its worktree was asked for on (None: recorded before hosts were)
    feedback: tuple[Feedback, ...] = ()  # one per generation judged and failed: the cycles spent
    answered: tuple[Answered, ...] = ()  # generations that ended waiting for answers, given them (no cycle spent)
    result: str | None = None  # passed | failed, once TaskFinished
    finished_binding: str | None = None
    finished_code: str | None = None

    def judged(self, generation: int) -> bool:
        """Whether the generation's end was dealt with: its work judged failed, or its questions answered."""
        return any(f.generation == generation for f in self.feedback) or \
            any(a.generation == generation for a in self.answered)


def apply(task: Task | None, event: ev.Event, position: int) -> Task:
    if isinstance(event, ev.TaskPlanned):
        return Task(event.task_id, event.run_id, event.title, event.version)
    if isinstance(event, ev.TaskPlannedV2):
        return Task(event.task_id, event.run_id, event.title, event.version, prompt_sha256=event.prompt_sha256)
    assert task is not None, f"{event.type_name()} before TaskPlanned"
    task = replace(task, version=event.version)
    if isinstance(event, ev.WorktreeRequested):
        return replace(task, worktree_intent=event.intent_id, worktree_failure=None, base=event.base,
                       repository=event.repository,
                       worktree_host=event.host if isinstance(event, ev.WorktreeRequestedV2) else None)
    if isinstance(event, ev.WorktreeCreated):
        return replace(task, worktree=event.path, branch=event.branch, worktree_intent=None)
    if isinstance(event, ev.WorktreeFailed):
        return replace(task, worktree_intent=None, worktree_failure=event.code)
    if isinstance(event, ev.WorktreePrepared):
        return replace(task, prepared=event.failed is None, setup_failure=event.failed)
    if isinstance(event, ev.WorktreeRemovalRequested):
        return replace(task, removal_intent=event.intent_id, removal_failure=None)
    if isinstance(event, ev.WorktreeRemoved):
        # a later launch makes the worktree again, at the run's base
        return replace(task, removal_intent=None, removed=event.path, worktree=None, branch=None, prepared=False,
                       setup_failure=None)
    if isinstance(event, ev.WorktreeRemovalFailed):
        return replace(task, removal_intent=None, removal_failure=event.code)
    if isinstance(event, ev.WorktreeLost):
        return replace(task, worktree=None, branch=None, worktree_intent=None, prepared=False, setup_failure=None,
                       worktree_host=None)
    if isinstance(event, ev.TaskFeedbackRecorded):
        return replace(task, feedback=(*task.feedback, Feedback(event.generation, event.code, event.check,
                                                                 event.binding_id, event.feedback)))
    if isinstance(event, ev.TaskAnswered):
        return replace(task, answered=(*task.answered, Answered(event.generation, event.note)))
    if isinstance(event, ev.TaskFinished):
        return replace(task, result=event.result, finished_binding=event.binding_id, finished_code=event.code)
    if isinstance(event, (ev.IntentOutcomeUnknown, ev.IntentOutcomeUnknownV2, ev.CandidateUnstable)):
        return task
    if isinstance(event, ev.IntentCancelled):
        return replace(task, worktree_intent=None if task.worktree_intent == event.intent_id else task.worktree_intent,
                       removal_intent=None if task.removal_intent == event.intent_id else task.removal_intent)
    raise TypeError(f"Task cannot apply {event.type_name()}")


def plan(existing: Task | None, run: Run, task_id: str, title: str, now: str, *,
         prompt_sha256: str | None = None, prompt_chars: int = 0) -> ev.Event:
    if existing is not None:
        raise Refused(Code.TASK_EXISTS, f"task {task_id} is already planned in run {existing.run_id}")
    require_open(run)
    return next_event(ev.TaskPlannedV2, stream_of(task_id), 0, now, task_id=task_id, run_id=run.run_id, title=title,
                      prompt_sha256=prompt_sha256, prompt_chars=prompt_chars)


def request_worktree(task: Task, run: Run, intent_id: str, repository: str, path: str, now: str, *,
                     base: str | None = None, host: str | None = None) -> list[ev.Event]:
    """The intent to make the task's worktree at base (default: the run's base) on host; nothing when it is made or
    already asked for. A task that depends on others starts from the merge of their delivered work."""
    require_open(run)
    if task.worktree is not None or task.worktree_intent is not None:
        return []
    if run.base_commit is None:
        raise Refused(Code.RUN_BASE_NOT_PINNED, f"run {run.run_id} has no pinned base commit yet")
    fields: dict[str, Any] = {} if host is None else {"host": host}
    return [next_event(ev.WorktreeRequestedV2 if host is not None else ev.WorktreeRequested, stream_of(task.task_id),
                       task.version, now, intent_id=intent_id, run_id=run.run_id, task_id=task.task_id,
                       repository=repository, path=path, branch=task_branch(run.run_id, task.task_id),
                       base=base or run.base_commit, **fields)]


def lose_worktree(task: Task, run: Run, host: str, reason: str, now: str) -> list[ev.Event]:
    """Give up the task's worktree, or its pending intent, on host, which stopped renewing its leases: the intent
    cancelled, then WorktreeLost; nothing when the task has neither. Deciding that host is gone is the caller's."""
    require_open(run)
    if task.worktree is None and task.worktree_intent is None:
        return []
    events: list[ev.Event] = []
    version = task.version
    if task.worktree_intent is not None:
        events.append(next_event(ev.IntentCancelled, stream_of(task.task_id), version, now,
                                 intent_id=task.worktree_intent, reason=reason))
        version += 1
    events.append(next_event(ev.WorktreeLost, stream_of(task.task_id), version, now, run_id=task.run_id,
                             task_id=task.task_id, path=task.worktree, host=host, reason=reason))
    return events


def record_feedback(task: Task, run: Run, *, generation: int, code: str, check: str | None,
                    binding_id: str | None, feedback: str, now: str) -> list[ev.Event]:
    """TaskFeedbackRecorded for a generation's failed work, once per generation (nothing if judged already)."""
    require_open(run)
    if task.result is not None:
        raise Refused(Code.TASK_FINISHED, f"task {task.task_id} has finished ({task.result})")
    if task.judged(generation):
        return []
    text = feedback.strip() or code
    if len(text) > MAX_FEEDBACK_CHARS:
        text = "…" + text[-(MAX_FEEDBACK_CHARS - 1):]
    return [next_event(ev.TaskFeedbackRecorded, stream_of(task.task_id), task.version, now, task_id=task.task_id,
                       run_id=task.run_id, generation=generation, code=code, check=check, binding_id=binding_id,
                       feedback=text)]


def finish(task: Task, run: Run, *, result: str, binding_id: str | None, code: str | None,
           message: str | None, now: str) -> list[ev.Event]:
    """TaskFinished, once (nothing when the task has finished already)."""
    require_open(run)
    if task.result is not None:
        return []
    return [next_event(ev.TaskFinished, stream_of(task.task_id), task.version, now, task_id=task.task_id,
                       run_id=task.run_id, result=result, cycles=len(task.feedback) + (result == "passed"),
                       binding_id=binding_id, code=code, message=(message or None) and message[:4000])]


def answered_prompt(prompt: str, answers: list[tuple[str, str, str]], *, goes_on: bool) -> str:
    """The prompt of a generation after ones that asked questions: each (question, answer, who answered) they were
    given (the last MAX_ANSWERS_SHOWN); goes_on: the last one ended asking, and this one goes on from its work."""
    if not answers:
        return prompt
    notes = answer_note(answers[-MAX_ANSWERS_SHOWN:])
    if goes_on:
        return (f"{prompt}\n\n---\nYou asked questions and stopped before they were answered. Your work so far is in "
                f"the workspace; go on from there. The answers:\n{notes}\n")
    return f"{prompt}\n\n---\nQuestions an earlier attempt asked, and their answers:\n{notes}\n"


def answer_note(questions: list[tuple[str, str, str]]) -> str:
    """What a TaskAnswered tells the next generation: each (question, answer, who answered), bounded."""
    parts = [f"Q: {question}\nA ({by}): {answer}" for question, answer, by in questions]
    text = "\n\n".join(parts)
    return text if len(text) <= MAX_FEEDBACK_CHARS else text[:MAX_FEEDBACK_CHARS - 1] + "…"


def record_answered(task: Task, run: Run, *, generation: int, request_keys: list[str], note: str,
                    now: str) -> list[ev.Event]:
    """TaskAnswered for a generation that ended waiting for answers, once (nothing if its end was dealt with)."""
    require_open(run)
    if task.result is not None:
        raise Refused(Code.TASK_FINISHED, f"task {task.task_id} has finished ({task.result})")
    if task.judged(generation):
        return []
    return [next_event(ev.TaskAnswered, stream_of(task.task_id), task.version, now, task_id=task.task_id,
                       run_id=task.run_id, generation=generation, request_keys=sorted(request_keys), note=note)]


def retry_prompt(prompt: str, feedback: tuple[Feedback, ...]) -> str:
    """The prompt of the next generation: the task's own, then what went wrong with the last attempt."""
    if not feedback:
        return prompt
    last = feedback[-1]
    what = f"the check {last.check} failed" if last.check else last.code.replace("-", " ")
    return (f"{prompt}\n\n---\nYour previous attempt (generation {last.generation}) was not accepted: {what}.\n"
            f"Fix it. What went wrong:\n{last.feedback}\n")


def check_feedback(check: str, result: str, code: str | None, tests: TestsReported | None, tail: str, *,
                   message: str | None = None, base_result: str | None = None, base_code: str | None = None) -> str:
    """What an agent needs to repair a failed check, at most MAX_FEEDBACK_CHARS characters: the failing tests of its
    JUnit report with the first lines of each (only those new against the base when it was judged relative to it),
    else the end of its output (tail, redacted already); escaped. message: what the failure says (the tracked file
    a check changed, say). base_result: the check's result on the run's base,
    when known; a note says when it fails there too."""
    from .reports.junit import TestReport, escaped, report_feedback

    lines = [f"{check}: {result}" + (f" ({code}: {escaped(message)})" if code and message else
                                      f" ({code})" if code else "")]
    judged_relative = tests is not None and tests.new_failures is not None
    if base_result is not None and base_result != "passed":
        how = base_result + (f", {base_code}" if base_code else "")
        lines.append(f"Note: {check} fails on the run's base too ({how}), before any change of yours. "
                     + ("Only tests that pass on the base count against you; they are below."
                        if judged_relative else "Some failures below may not be yours: do what the task asks "
                                                "without breaking anything more."))
    head = "\n".join(lines) + "\n"
    room = MAX_FEEDBACK_CHARS - len(head)
    if tests is not None and tests.problem is None and tests.failing:
        body = report_feedback(TestReport(0, tests.failing), new=tests.new_failures if judged_relative else None,
                               max_chars=room)
    else:
        why = f"(its report could not be used: {tests.problem})\n" if tests is not None and tests.problem else ""
        end = "\n".join(escaped(line) for line in tail.splitlines())
        body = why + "The end of its output:\n" + end[-(room - len(why) - 24):]
    return (head + body)[:MAX_FEEDBACK_CHARS]


def decide_worktree(task: Task, intent: ev.WorktreeRequested, observed: WorktreeObservation,
                    now: str) -> ev.Event | Unknown | Act:
    from .effects import Act, Unknown

    stream = stream_of(task.task_id)
    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, task_id=intent.task_id)
    if observed.state in ("absent", "branch-only"):
        return Act()
    if observed.state == "present":
        assert observed.head is not None
        return next_event(ev.WorktreeCreated, stream, task.version, now, **common, path=intent.path,
                          branch=intent.branch, head=observed.head, result="observed")
    if observed.state == "diverged":
        return next_event(ev.WorktreeFailed, stream, task.version, now, **common, code="worktree-diverged",
                          message=(observed.detail or f"something else is at {intent.path}")[:4000])
    return Unknown(observed.detail or f"cannot read the repository {intent.repository}")


def created(outcome: ev.Event) -> ev.Event:
    """After the act: the same outcome, but made now rather than found."""
    if isinstance(outcome, ev.WorktreeCreated):
        return outcome.model_copy(update={"result": "created"})
    return outcome


def prepared(task: Task, path: str, setup_commands: int, included: list[str], failed: str | None,
             message: str | None, now: str) -> ev.Event:
    return next_event(ev.WorktreePrepared, stream_of(task.task_id), task.version, now, run_id=task.run_id,
                      task_id=task.task_id, path=path, setup_commands=setup_commands, included=included,
                      failed=failed, message=message)


def request_removal(task: Task, *, intent_id: str, repository: str, head: str, tree: str,
                    binding_id: str | None, now: str) -> list[ev.Event]:
    """The intent to remove the task's worktree and branch; nothing when a removal is pending already.

    The caller proves the content is preserved (binding_id: the pinned candidate
    with the worktree's tree; None: nothing changed against the base).
    """
    if task.removal_intent is not None:
        return []
    if task.worktree is None or task.branch is None:
        raise Refused(Code.NO_WORKTREE, f"task {task.task_id} has no worktree"
                                     + (f" (its worktree {task.removed} was removed)" if task.removed else ""))
    return [next_event(ev.WorktreeRemovalRequested, stream_of(task.task_id), task.version, now, intent_id=intent_id,
                       run_id=task.run_id, task_id=task.task_id, repository=repository, path=task.worktree,
                       branch=task.branch, head=head, tree=tree,
                       preserved_by="candidate" if binding_id else "unchanged", binding_id=binding_id)]


@dataclass(frozen=True)
class RemovalObservation:
    """A task's worktree before its removal: gone (no folder, no admin entry, no branch), present (at the head
    the removal expects, or only its branch is left there), moved (HEAD or the branch names another commit, or
    something else is at the path: detail), or unreadable."""

    state: Literal["gone", "present", "moved", "unreadable"]
    detail: str = ""


def decide_removal(task: Task, intent: ev.WorktreeRemovalRequested, observed: RemovalObservation,
                   now: str) -> ev.Event | Unknown | Act:
    from .effects import Act, Unknown

    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, task_id=intent.task_id)
    if observed.state == "gone":
        return next_event(ev.WorktreeRemoved, stream_of(task.task_id), task.version, now, **common, path=intent.path,
                          result="observed")
    if observed.state == "present":
        return Act()
    if observed.state == "moved":
        return next_event(ev.WorktreeRemovalFailed, stream_of(task.task_id), task.version, now, **common,
                          code="worktree-moved",
                          message=(observed.detail or f"{intent.path} moved since its removal was decided")[:4000])
    return Unknown(observed.detail or f"cannot read {intent.path}")


def removed(outcome: ev.Event) -> ev.Event:
    """After the act: removed now, not found gone."""
    if isinstance(outcome, ev.WorktreeRemoved):
        return outcome.model_copy(update={"result": "removed"})
    return outcome
