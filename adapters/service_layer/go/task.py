"""One task's work in a `docket go` run, in its own thread and ledger session: generation after generation,
launch the agent, supervise it to its end, judge what it left (pin, required checks, handoff), and record the
task's feedback or its end. See go.py for the run as a whole."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from ....domain import candidate as candidate_aggregate
from ....domain import run as run_aggregate
from ....domain import task as task_aggregate
from ....domain import worker as worker_aggregate
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import DocketError, OutcomeUnknown, Refused, RunClosed
from ...world import faults
from ..use_cases.checks import CheckInterrupted
from .session import Session
from .settings import GoSettings
from ..use_cases.runs import load_run
from ..use_cases.tasks import load_task
from .agent_places import AgentPlace, AgentPlaces, _Holder
from .judging import RETRY_SECONDS, _HeldForAPerson, _judge, finish_task, task_worker_id

__all__ = ["finish_task", "judgeable", "queued_tasks", "task_worker_id", "work_on"]

JUDGED_CAUSES = frozenset({"exited", "timeout", "idle-timeout"})
ANSWER_POLL_SECONDS = 1.0  # how often a task whose agent ended asking looks for the answers


def judgeable(worker: worker_aggregate.Worker) -> bool:
    """Whether the generation's end says something about the agent's work: it exited by itself, ran out of time,
    could not start, or someone stopped it on purpose. docket's own stops (pause, supervisor gone) and unknown ends
    are not judged."""
    if worker.status == "launch-failed":
        return worker.exit_cause != "cancelled"
    if worker.status != "exited":
        return False
    return worker.exit_cause in JUDGED_CAUSES or (worker.exit_cause == "stopped" and worker.stop_reason == "requested")


def work_on(open_session: Callable[[], Session], settings: GoSettings, run_id: str, task_id: str,
            interrupted: threading.Event | None = None, *, agents: AgentPlaces | None = None,
            place: AgentPlace | None = None) -> None:
    """Attempt the task, generation after generation, until it finishes, its run is no longer active, it waits for a
    person, or this supervisor is interrupted.

    With ``agents`` (--parallel's places), each generation holds a place from before it is launched until its agent
    has ended, and none while it is judged; ``place``: one already taken for the task (given back however this
    ends). Without, nothing waits."""
    holder = _Holder(agents, place)
    try:
        s = open_session()
    except BaseException:
        holder.release()
        raise
    try:
        _work_on(s, settings, run_id, task_id, interrupted, holder)
    except _HeldForAPerson:
        return
    except CheckInterrupted:
        if interrupted is None or not interrupted.is_set():
            raise
        return  # its check was stopped and recorded as interrupted: the generation is judged again on resume
    finally:
        holder.release()
        s.close()


def _work_on(s: Session, settings: GoSettings, run_id: str, task_id: str,
             interrupted: threading.Event | None, holder: _Holder) -> None:
    while interrupted is None or not interrupted.is_set():
        run = load_run(s.ledger, run_id)
        task = load_task(s.ledger, task_id)
        if run.status != "active" or task.result is not None:
            return
        assert run.plan is not None
        worker = s.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(task_worker_id(task_id)))
        if _taken_over(s, task, worker):
            continue
        if worker is not None and worker.status in ("launching", "running"):
            return  # a generation another docket process supervises, or one reconcile has not settled
        if worker is not None and worker.status == "exited" and not task.judged(worker.generation) \
                and task_id not in queued_tasks(s, run_id, worker.generation) \
                and _ended_asking(s, task, worker, waiting=holder.release):
            holder.release()  # no agent of the task runs while its questions wait
            continue  # however it ended (by itself, stopped, its docket gone), its questions come first
        if worker is not None and judgeable(worker) and not task.judged(worker.generation):
            if task_id in queued_tasks(s, run_id, worker.generation):
                return  # its step is the integrator's: it finishes the task, or drops it and the task goes on
            holder.release()
            _judge(s, settings, run, task, worker)
            continue
        if len(task.feedback) >= run.plan.cycles:
            last = task.feedback[-1] if task.feedback else None
            finish_task(s, task_id, "failed", None, last.code if last else "no-cycles",
                        f"{len(task.feedback)} cycle(s) spent; the last: {last.feedback if last else 'none'}")
            return
        if holder.needs_place:
            holder.take(interrupted)  # waited for (a second at most, or until interrupted)
            continue  # the run and the task read again, a place held or not: what the wait changed is seen
        try:
            if not _attempt(s, settings, run, task):
                return
        finally:
            holder.release()  # its agent has ended (supervise returned), or was never launched: before it is judged


def _taken_over(s: Session, task: task_aggregate.Task, worker: worker_aggregate.Worker | None) -> bool:
    """Whether the task's worktree, and its generation there, were just given up: they are on another host, whose
    lease on the worktree expired unrenewed (``takeover``). The next pass launches a generation here."""
    from ..use_cases.takeover import take_over, worktree_host

    here = s.effector.ports.processes.this_host()[0]
    if worktree_host(task, worker) in (None, here):
        return False
    unjudged = (worker is not None and judgeable(worker) and not task.judged(worker.generation)
                and task.task_id not in queued_tasks(s, task.run_id, worker.generation))  # queued: judged, handed off
    return take_over(s.ledger, s.clock, here, task.task_id, task_worker_id(task.task_id), unjudged=unjudged)


def _ended_asking(s: Session, task: task_aggregate.Task, worker: worker_aggregate.Worker, *,
                  waiting: Callable[[], object] = lambda: None) -> bool:
    """Whether the generation ended with questions whose answers never reached it (unanswered yet, or answered
    after it could no longer be told), and so is not judged: it waits for them (awaiting input; their deadlines apply
    meanwhile), then the next generation goes on with the answers (TaskAnswered, no cycle spent). A question that
    expired at its deadline, its policy to fail, fails the task. ``waiting`` is called before it waits for them."""
    from ..use_cases.requests import apply_deadlines, questions_of

    questions = questions_of(s.ledger, worker.worker_id, worker.generation)
    if not questions:
        return False
    expired = [q for q in questions if q.status == "expired"]
    if expired:  # its policy is to fail the task: whatever the generation did after
        finish_task(s, task.task_id, "failed", None, Code.QUESTION_EXPIRED,
                    f"question {expired[0].key} was not answered by its deadline ({expired[0].deadline_at})")
        return True
    unanswered = [q for q in questions if q.status == "open" or (q.status == "answered" and not q.delivered)]
    if not unanswered:
        return False
    if any(q.status == "open" for q in unanswered):
        if apply_deadlines(s.ledger, s.clock, [q.key for q in unanswered if q.status == "open"]):
            return True
        waiting()
        time.sleep(ANSWER_POLL_SECONDS)
        return True
    note = task_aggregate.answer_note([(q.question or "", q.answer or "", q.answered_by or "") for q in unanswered])

    def decision(now: str) -> list[Any]:
        return task_aggregate.record_answered(load_task(s.ledger, task.task_id), load_run(s.ledger, task.run_id),
                                              generation=worker.generation, request_keys=[q.key for q in unanswered],
                                              note=note, now=now)

    faults.crash_point("go:before-answered")
    try:
        s.ledger.decide(decision, s.clock.now())
    except RunClosed:
        pass
    return True


def _attempt(s: Session, settings: GoSettings, run: run_aggregate.Run, task: task_aggregate.Task) -> bool:
    """Launch the next generation and supervise it to its end; False when it could not be launched for now."""
    from ..use_cases.supervisor import Limits, supervise
    from ..use_cases.workers import LaunchRequest, launch_worker

    base = None
    try:
        repair = _repair_base(s, task, settings.repository)
    except OutcomeUnknown:  # made on another machine, not fetched from the remote yet: tried again on a later pass
        time.sleep(RETRY_SECONDS)
        return False
    if repair is not None and task.worktree is not None and task.base != repair:
        from ..use_cases.housekeeping import remove_task_worktree

        faults.crash_point("go:before-repair")  # its candidate keeps the work: the worktree is made again
        remove_task_worktree(s.ledger, s.clock, s.effector, s.effector.ports.processes, task.task_id,
                             [task.feedback[-1].binding_id or ""], artifact_dir=settings.artifact_dir)
        task = load_task(s.ledger, task.task_id)
    try:
        if task.worktree is None and task.worktree_intent is None:
            base = repair or _start_commit(s, settings, run, task)
            if base is False:
                return True  # finished failed: its dependencies do not merge
            if base is None:
                _fetch_run_base(s, run, settings.repository)
        elif task.worktree is None and repair is None and task.worktree_intent is not None:
            # the merge its pending worktree starts from, written again (the same commit) if a prune took it, and
            # the intent driven at once (not after its back-off): a prune that runs again meanwhile takes it again
            if _start_commit(s, settings, run, task) is False:
                return True
            s.effector.run_pending(only={task.worktree_intent}, after=0, force=True)
    except OutcomeUnknown:  # a dependency's candidate not fetched from the remote yet: tried again on a later pass
        time.sleep(RETRY_SECONDS)
        return False
    if _worktree_backing_off(s, load_task(s.ledger, task.task_id)):
        time.sleep(RETRY_SECONDS)
        return False  # nothing recorded meanwhile: no supervision is begun for a launch that cannot go on yet
    if not _still_driving(s, run):
        time.sleep(RETRY_SECONDS)
        return False  # another host took the run over: this driver stops at its next renewal, launching nothing
    agent = settings.agent
    request = LaunchRequest(run_id=run.run_id, task_id=task.task_id, worker_id=task_worker_id(task.task_id),
                            agent=agent.name, command=agent.command, prompt_mode=agent.prompt_mode, env=agent.env,
                            env_allow=agent.env_allow, setup=settings.setup, include=settings.include,
                            ports=settings.ports, artifact_dir=settings.artifact_dir, pin_on_exit=False,
                            base=base or None, report=agent.report, workspace_root=settings.workspace_root,
                            confinement=agent.confinement, inbox=settings.inbox)
    faults.crash_point("go:before-launch")
    try:
        launched = launch_worker(s.ledger, s.clock, s.effector, s.effector.ports.launcher, request,
                                 docket_dir=settings.docket_dir, repository=settings.repository,
                                 main_checkout=settings.main_checkout, ledger_path=settings.ledger_path)
    except RunClosed:
        return False
    except OutcomeUnknown:
        if load_task(s.ledger, task.task_id).worktree is not None:
            raise  # the launch itself: recovering it is replay's ('docket go --resume' recovers first)
        # its worktree is not known to be made yet (e.g. a branch lock a killed docket left, stale after
        # ref_locks.STALE_LOCK_SECONDS): observed again on a later pass, as every unknown outcome is; the run goes on
        time.sleep(RETRY_SECONDS)
        return False
    except Refused as e:
        if e.code in (Code.WORKER_RUNNING, Code.LAUNCHED_ELSEWHERE, Code.LEASE_HELD, Code.LEASE_HOLDER_UNKNOWN,
                      Code.WORKTREE_ELSEWHERE):
            return False
        raise
    except DocketError as e:
        if e.code == Code.SETUP_FAILED:
            finish_task(s, task.task_id, "failed", None, Code.SETUP_FAILED, e.message)
            return True
        raise
    supervise(s.ledger, s.clock, s.effector, [(launched, Limits(agent.timeout_ms, agent.idle_timeout_ms, agent.max_log))],
              supervisions=launched.supervisions)
    faults.crash_point("go:after-agent")
    return True


def _worktree_backing_off(s: Session, task: task_aggregate.Task) -> bool:
    """Whether the task's pending worktree intent was last observed unknown and asked to wait (its retry_at)."""
    if task.worktree is not None or task.worktree_intent is None:
        return False
    unknowns = [event for _, event in s.ledger.history(task_aggregate.stream_of(task.task_id))
                if getattr(event, "intent_id", None) == task.worktree_intent and hasattr(event, "retry_at")]
    retry_at = unknowns[-1].retry_at if unknowns else None  # on the task's own stream: no scan of the ledger
    return retry_at is not None and s.clock.now() < retry_at


def queued_tasks(s: Session, run_id: str, generation: int | None = None) -> frozenset[str]:
    """The tasks whose candidate waits in the run's merge queue (queued, not yet verified or dropped); of that
    generation only, when given."""
    from ..merge_queue.integration_steps import load_integration

    integration = load_integration(s.ledger, run_id)
    if integration is None or not integration.rolling or (integration.ended and not integration.moved_unrecorded()):
        return frozenset()  # a queue whose target move found the target moved goes on once re-queued onto it
    return frozenset(step.task_id for step in integration.steps
                     if step.status not in ("verified", "conflicted", "rejected", "requeued")
                     and generation in (None, step.generation))


def _still_driving(s: Session, run: run_aggregate.Run) -> bool:
    """Whether this host still drives the run (its driver lease not taken over); a run on a ledger file has one
    host, which always does."""
    if run.remote is None:
        return True
    from ..use_cases.takeover import drives_here

    return drives_here(s.ledger, load_run(s.ledger, run.run_id), s.effector.ports.processes.this_host()[0])


def _repair_base(s: Session, task: task_aggregate.Task, repository: Path) -> str | None:
    """The integrated head a repair starts from: when the task's last feedback says its step was dropped from the
    merge queue, the head that step did not go onto (in repository, where the task's worktree is made: fetched from
    the remote when another machine's queue made it)."""
    from ..merge_queue.integration_steps import fetch_integrated, load_integration

    last = task.feedback[-1] if task.feedback else None
    if last is None or last.code not in (Code.INTEGRATION_CONFLICT, Code.INTEGRATION_REJECTED):
        return None
    integration = load_integration(s.ledger, task.run_id)
    if integration is None:
        return None
    dropped = [step for step in integration.steps if step.task_id == task.task_id
               and step.binding_id == last.binding_id and step.base is not None]
    if not dropped:
        return None
    base = dropped[-1].base
    assert base is not None
    fetch_integrated(s.ledger, s.effector, integration, base, repository=repository)
    return base


def _fetch_run_base(s: Session, run: run_aggregate.Run, repository: Path) -> None:
    """The run's base in repository: with a shared remote, fetched from its target branch there when this clone
    does not have it yet (the base was read there on another machine). OutcomeUnknown while it cannot be."""
    if run.remote is None or run.base_commit is None:
        return
    if not s.effector.ports.remotes.fetch(repository, *run.remote, f"refs/heads/{run.target_branch}",
                                          run.base_commit, reaching=True):
        raise OutcomeUnknown(Code.REMOTE_UNREACHABLE, f"the run's base {run.base_commit} is not here and cannot be "
                                                   f"fetched from the remote {run.remote[0]} yet")


def _start_commit(s: Session, settings: GoSettings, run: run_aggregate.Run,
                  task: task_aggregate.Task) -> str | Literal[False] | None:
    """Where a new worktree of the task starts: None for the run's base; for a task that depends on others, the
    merge of their passed candidates onto the base, in task order (False: they conflict, and the task failed)."""
    assert run.plan is not None and run.base_commit is not None
    depends_on = run.plan.depends_on(task.task_id)
    if not depends_on:
        return None
    head = run.base_commit
    for dependency in depends_on:
        binding = load_task(s.ledger, dependency).finished_binding
        candidate = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding or ""))
        if candidate is None or candidate.commit is None:
            finish_task(s, task.task_id, "failed", None, "dependency-missing", f"{dependency} has no candidate")
            return False
        message = f"docket: start {task.task_id} from {dependency}\n\nDocket-Run: {run.run_id}\n"
        if run.remote is not None and not s.effector.ports.remotes.fetch(settings.repository, *run.remote,
                                                                         candidate.ref, candidate.commit):
            raise OutcomeUnknown(Code.REMOTE_UNREACHABLE, f"{dependency}'s candidate {candidate.commit} cannot be "
                                                       f"fetched from the remote {run.remote[0]} yet")
        merged = s.effector.ports.merges.merge_candidate(settings.repository, head, candidate.commit, message)
        if merged.state in ("merged", "already-merged") and merged.commit:
            head = merged.commit
            continue
        finish_task(s, task.task_id, "failed", None, "dependency-conflict",
                f"the work of {', '.join(depends_on)} does not merge ({merged.state}): "
                f"{', '.join(merged.conflicts[:10]) or merged.detail}")
        return False
    return head


def task_ids(run: run_aggregate.Run) -> Sequence[str]:
    return run.plan.task_ids if run.plan is not None else ()
