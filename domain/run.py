"""The Run aggregate: one goal on one target branch, from a pinned base commit.

Statuses: opening (base pin pending) -> active <-> paused -> completed;
opening/active/paused -> aborted; active/paused -> budget-limited (its time budget is
spent: RunBudgetExhausted, or what its agents reported they used reached its max cost
or max tokens: RunUsageExhausted, domain.usage); opening -> failed (base could not be
pinned). A run supervised by ``docket go`` also carries its plan (RunPlanned): tasks, dependencies, agent,
cycles and parallelism, and while it waits for its user (RunWaiting: a checkout in
the way, an approval) why and what to do, until it is supervised again.
The budget is the sum of the run's active intervals (domain.budget): the clock
runs while the run is active and at least one docket process supervises it
(RunSupervised .. RunUnsupervised), so time spent paused, or with no supervisor
alive, is not billed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from . import budget, events as ev, usage as usage_rules
from .aggregate import next_event
from .kernel.errors import BadInput, Refused, RunClosed
from .kernel.names import check_branch_name
from .containment.process_identity import ProcessIdentity as Process
from .kernel.streams import run_stream as stream_of
from .containment.trust import MAX_TRUSTED_PATHS
from .kernel.values import format_duration
from .kernel.codes import Code

__all__ = [
    "Run",
    "abort",
    "apply",
    "complete",
    "record_configuration",
    "exhaust_budget",
    "exhaust_usage",
    "plan_run",
    "open_run",
    "pause",
    "record_base_pin",
    "require_open",
    "resume",
    "stream_of",
    "supervised",
    "unsupervised",
    "wait",
]

OPEN_STATUSES = frozenset({"opening", "active", "paused"})


@dataclass(frozen=True)
class Supervision:
    supervision_id: str
    supervisor: Process
    since: str


@dataclass(frozen=True)
class Plan:
    """How ``docket go`` supervises the run (RunPlanned)."""

    tasks: tuple[tuple[str, tuple[str, ...]], ...]  # (task id, the task ids it depends on), in task order
    agent: str
    cycles: int
    parallel: int
    export_key: tuple[str, str] | None = None  # (key id, private key path) the receipt is exported with
    added: int = 0  # the last tasks are follow-ups added while it worked (RunTaskAdded), not RunPlanned's
    follow_ups: tuple[tuple[str, str, str], ...] = ()  # (proposing task, proposal digest, task added) of each

    def depends_on(self, task_id: str) -> tuple[str, ...]:
        return next((deps for task, deps in self.tasks if task == task_id), ())

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(task for task, _ in self.tasks)

    def as_planned(self) -> Plan:
        """The plan RunPlanned recorded, without the follow-up tasks added since."""
        return replace(self, tasks=self.tasks[:len(self.tasks) - self.added], added=0, follow_ups=())


@dataclass(frozen=True)
class Run:
    run_id: str
    version: int
    goal: str
    target_branch: str
    budget_ms: int | None
    status: str
    opened_at: str
    base_commit: str | None = None
    failure_code: str | None = None
    failure_message: str | None = None
    closed_ms: int = 0  # budget spent in closed active intervals
    active_since: str | None = None  # start of the open active interval, if the clock runs
    pending_intents: frozenset[str] = frozenset()
    supervisions: tuple[Supervision, ...] = ()  # the docket processes supervising it now
    plan: Plan | None = None  # set by `docket go` (RunPlanned)
    waiting: tuple[str, str] | None = None  # (code, message) of RunWaiting, until the next supervision
    remote: tuple[str, str] | None = None  # (name, URL) of the shared git remote its base, candidates and target use
    max_cost_micro_usd: int | None = None  # RunOpened.v2's limits on what its agents report they used
    max_tokens: int | None = None
    limited_by: str | None = None  # what made it budget-limited: "time", "cost" or "tokens"
    configured: bool = False  # RunConfigurationRecorded: what it trusts is recorded (domain/containment/trust.py)
    config_sha256: str | None = None
    trusted_paths: tuple[str, ...] = ()  # a candidate changing one is queued only once a person approves it

    @property
    def limits_usage(self) -> bool:
        return self.max_cost_micro_usd is not None or self.max_tokens is not None

    def used_ms(self, now: str) -> int:
        """Milliseconds of budget spent: closed intervals, and the open one up to now."""
        return budget.used_ms(self.closed_ms, self.active_since, now)

    def remaining_ms(self, now: str) -> int | None:
        return budget.remaining_ms(self.budget_ms, self.used_ms(now))


def apply(run: Run | None, event: ev.Event, position: int) -> Run:
    if isinstance(event, ev.RunOpened):
        return Run(
            run_id=event.run_id,
            version=event.version,
            goal=event.goal,
            target_branch=event.target_branch,
            budget_ms=event.budget_ms,
            status="opening",
            opened_at=event.recorded_at,
            max_cost_micro_usd=getattr(event, "max_cost_micro_usd", None),
            max_tokens=getattr(event, "max_tokens", None),
        )
    assert run is not None, f"{event.type_name()} before RunOpened"
    run = replace(run, version=event.version)
    if isinstance(event, ev.RunBasePinRequested):
        remote = (event.remote, event.remote_url) if isinstance(event, ev.RunBasePinRequestedV2) else run.remote
        return replace(run, pending_intents=run.pending_intents | {event.intent_id}, remote=remote)
    if isinstance(event, ev.RunBasePinned):
        return _clocked(replace(
            run,
            base_commit=event.commit,
            status="active" if run.status == "opening" else run.status,
            pending_intents=run.pending_intents - {event.intent_id},
        ), event.recorded_at)
    if isinstance(event, ev.RunSupervised):
        if any(s.supervision_id == event.supervision_id for s in run.supervisions):
            return run
        p = event.supervisor
        supervision = Supervision(event.supervision_id, Process(p.host, p.boot_id, p.pid, p.pgid, p.start_time),
                                  event.recorded_at)
        return _clocked(replace(run, supervisions=(*run.supervisions, supervision), waiting=None), event.recorded_at)
    if isinstance(event, ev.RunWaiting):
        return replace(run, waiting=(event.code, event.message))
    if isinstance(event, ev.RunUnsupervised):
        left = tuple(s for s in run.supervisions if s.supervision_id != event.supervision_id)
        return _clocked(replace(run, supervisions=left), event.recorded_at, ended_at=event.ended_at)
    if isinstance(event, ev.RunBasePinFailed):
        return replace(
            _close_interval(run, event.recorded_at),
            status="failed",
            failure_code=event.code,
            failure_message=event.message,
            pending_intents=run.pending_intents - {event.intent_id},
        )
    if isinstance(event, (ev.IntentOutcomeUnknown, ev.IntentOutcomeUnknownV2)):
        return run
    if isinstance(event, ev.IntentCancelled):
        return replace(run, pending_intents=run.pending_intents - {event.intent_id})
    if isinstance(event, ev.RunPaused):
        return replace(_close_interval(run, event.recorded_at), status="paused")
    if isinstance(event, ev.RunResumed):
        return _clocked(replace(run, status="active"), event.recorded_at)
    if isinstance(event, ev.RunAborted):
        return replace(_close_interval(run, event.recorded_at), status="aborted")
    if isinstance(event, ev.RunCompleted):
        return replace(_close_interval(run, event.recorded_at), status="completed")
    if isinstance(event, ev.RunPlanned | ev.RunPlannedV2):
        key = getattr(event, "export_key", None)
        return replace(run, plan=Plan(tuple((t.task_id, tuple(t.depends_on)) for t in event.tasks), event.agent,
                                      event.cycles, event.parallel, None if key is None else (key.keyid, key.path)))
    if isinstance(event, ev.RunConfigurationRecorded):
        return replace(run, configured=True, config_sha256=event.config_sha256,
                       trusted_paths=tuple(event.trusted_paths))
    if isinstance(event, ev.RunTaskAdded):
        assert run.plan is not None
        added = (event.task.task_id, tuple(event.task.depends_on))
        follow_up = (event.proposed_by, event.proposal_sha256, event.task.task_id)
        return replace(run, plan=replace(run.plan, tasks=run.plan.tasks + (added,), added=run.plan.added + 1,
                                         follow_ups=run.plan.follow_ups + (follow_up,)))
    if isinstance(event, ev.RunBudgetExhausted):
        return replace(_close_interval(run, event.recorded_at), status="budget-limited", limited_by="time")
    if isinstance(event, ev.RunUsageExhausted):
        return replace(_close_interval(run, event.recorded_at), status="budget-limited", limited_by=event.limit)
    raise TypeError(f"Run cannot apply {event.type_name()}")


def _close_interval(run: Run, at: str) -> Run:
    return replace(run, closed_ms=run.used_ms(at), active_since=None)


def _clocked(run: Run, at: str, *, ended_at: str | None = None) -> Run:
    """The budget's clock runs while the run is active and supervised: start or stop it at ``at``."""
    running = run.status == "active" and bool(run.supervisions)
    closed_ms, active_since = budget.clock(run.closed_ms, run.active_since, running, at, ended_at=ended_at)
    return replace(run, closed_ms=closed_ms, active_since=active_since)


def supervised(run: Run, supervision_id: str, supervisor: Process, now: str) -> ev.Event:
    """A docket process starts supervising the run's work: its budget's clock runs while one does."""
    require_open(run)
    return next_event(ev.RunSupervised, stream_of(run.run_id), run.version, now, run_id=run.run_id,
                      supervision_id=supervision_id,
                      supervisor=ev.ProcessIdentity(host=supervisor.host, boot_id=supervisor.boot_id,
                                                    pid=supervisor.pid, pgid=supervisor.pgid,
                                                    start_time=supervisor.start_time))


def unsupervised(run: Run, supervision_id: str, now: str, *, last_seen: str | None = None) -> list[ev.Event]:
    """The supervision ends (nothing if it already has). last_seen: a gone supervisor's last sign of life."""
    if not any(s.supervision_id == supervision_id for s in run.supervisions):
        return []
    return [next_event(ev.RunUnsupervised, stream_of(run.run_id), run.version, now, run_id=run.run_id,
                       supervision_id=supervision_id, ended_at=last_seen or now,
                       cause="finished" if last_seen is None else "supervisor-gone")]


def wait(run: Run, code: str, message: str, now: str) -> list[ev.Event]:
    """RunWaiting: the active run cannot go on without its user (code, and message: what to do). Nothing when it
    waits for just that already, or is not active."""
    message = message[:4000]
    if run.status != "active" or run.waiting == (code, message):
        return []
    return [next_event(ev.RunWaiting, stream_of(run.run_id), run.version, now, run_id=run.run_id, code=code,
                       message=message)]


def open_run(
    run_id: str, intent_id: str, goal: str, target_branch: str, budget_ms: int | None,
    repository: str, now: str, remote: tuple[str, str] | None = None, *,
    max_cost_micro_usd: int | None = None, max_tokens: int | None = None,
) -> list[ev.Event]:
    """RunOpened (with its time budget and its limits on cost and tokens) and the intent to pin the target branch's
    commit as the base: the repository's own branch, or the one on the shared git remote (name, URL) when given."""
    check_branch_name(target_branch)
    if not goal.strip():
        raise BadInput(Code.EMPTY_GOAL, "a run needs a goal")
    stream = stream_of(run_id)
    opened = next_event(
        ev.RunOpenedV2, stream, 0, now, run_id=run_id, goal=goal, target_branch=target_branch, budget_ms=budget_ms,
        max_cost_micro_usd=max_cost_micro_usd, max_tokens=max_tokens,
    )
    on_remote = {} if remote is None else {"remote": remote[0], "remote_url": remote[1]}
    pin = next_event(
        ev.RunBasePinRequestedV2 if remote else ev.RunBasePinRequested, stream, 1, now, intent_id=intent_id,
        run_id=run_id, target_branch=target_branch, repository=repository, **on_remote,
    )
    return [opened, pin]


def record_base_pin(run: Run, intent_id: str, now: str, *, commit: str | None = None,
                    failure: tuple[str, str] | None = None) -> ev.Event:
    """The outcome of the base-pin intent: pinned at commit, or failed with (code, message).

    Whether the intent still waits for it is checked in one place, by the effector
    (``domain.effects.is_resolved``), inside the transaction that appends it.
    """
    stream = stream_of(run.run_id)
    if failure is not None:
        code, message = failure
        return next_event(ev.RunBasePinFailed, stream, run.version, now,
                          intent_id=intent_id, run_id=run.run_id, code=code, message=message)
    assert commit is not None
    return next_event(ev.RunBasePinned, stream, run.version, now,
                      intent_id=intent_id, run_id=run.run_id, commit=commit, result="observed")


def pause(run: Run, reason: str | None, now: str) -> ev.Event:
    if run.status != "active":
        raise Refused(Code.RUN_NOT_ACTIVE, f"run {run.run_id} is {run.status}; only an active run can be paused")
    return next_event(ev.RunPaused, stream_of(run.run_id), run.version, now, run_id=run.run_id, reason=reason)


def resume(run: Run, now: str) -> ev.Event:
    if run.status != "paused":
        raise Refused(Code.RUN_NOT_PAUSED, f"run {run.run_id} is {run.status}; only a paused run can be resumed")
    remaining = run.remaining_ms(now)
    if remaining == 0:
        raise Refused(
            Code.BUDGET_EXHAUSTED,
            f"run {run.run_id} has used its whole budget of {format_duration(run.budget_ms or 0)}",
        )
    return next_event(ev.RunResumed, stream_of(run.run_id), run.version, now, run_id=run.run_id)


def abort(run: Run, reason: str, now: str) -> list[ev.Event]:
    """RunAborted, and a recorded cancellation for each of the run's intents still pending."""
    if run.status not in OPEN_STATUSES:
        raise RunClosed(f"run {run.run_id} is already {run.status}")
    stream = stream_of(run.run_id)
    events: list[ev.Event] = [
        next_event(ev.RunAborted, stream, run.version, now, run_id=run.run_id, reason=reason)]
    for intent_id in sorted(run.pending_intents):
        events.append(next_event(ev.IntentCancelled, stream, events[-1].version, now, intent_id=intent_id,
                                 reason=f"run {run.run_id} was aborted"))
    return events


def plan_run(run: Run, tasks: list[tuple[str, list[str]]], agent: str, cycles: int, parallel: int,
             now: str, export_key: tuple[str, str] | None = None) -> list[ev.Event]:
    """RunPlanned, once: nothing when the same plan is recorded already; a different one is refused."""
    require_open(run)
    wanted = Plan(tuple((task, tuple(deps)) for task, deps in tasks), agent, cycles, parallel, export_key)
    if run.plan is not None:
        if run.plan.as_planned() == wanted:
            return []
        raise Refused(Code.PLAN_DIFFERS, f"run {run.run_id} is already planned with other tasks, agent, cycles or "
                                      "parallelism; resume it with the same ones")
    key = None if export_key is None else ev.ExportKey(keyid=export_key[0], path=export_key[1])
    return [next_event(ev.RunPlannedV2, stream_of(run.run_id), run.version, now, run_id=run.run_id,
                       tasks=[ev.PlannedTask(task_id=task, depends_on=list(deps)) for task, deps in wanted.tasks],
                       agent=agent, cycles=cycles, parallel=parallel, export_key=key)]


def record_configuration(run: Run, *, config_sha256: str | None, trusted_paths: Sequence[str],
                         now: str) -> list[ev.Event]:
    """RunConfigurationRecorded, once: a resumed run keeps what it trusted when it was planned."""
    require_open(run)
    if run.configured:
        return []
    paths = sorted(set(trusted_paths))
    if len(paths) > MAX_TRUSTED_PATHS:
        raise BadInput(Code.TOO_MANY_TRUSTED_PATHS, f"the checks, hooks and setup commands name {len(paths)} repository "
                                                 f"files; at most {MAX_TRUSTED_PATHS}")
    return [next_event(ev.RunConfigurationRecorded, stream_of(run.run_id), run.version, now, run_id=run.run_id,
                       config_sha256=config_sha256, trusted_paths=paths)]


def exhaust_budget(run: Run, now: str) -> list[ev.Event]:
    """RunBudgetExhausted (and a cancellation for each pending intent of the run) once an open run's budget is
    spent; nothing while some is left."""
    if run.status not in ("active", "paused") or run.budget_ms is None or run.remaining_ms(now) != 0:
        return []
    stream = stream_of(run.run_id)
    events: list[ev.Event] = [next_event(ev.RunBudgetExhausted, stream, run.version, now, run_id=run.run_id,
                                         budget_ms=run.budget_ms, used_ms=run.used_ms(now))]
    for intent_id in sorted(run.pending_intents):
        events.append(next_event(ev.IntentCancelled, stream, events[-1].version, now, intent_id=intent_id,
                                 reason=f"run {run.run_id} ran out of budget"))
    return events


def exhaust_usage(run: Run, usage: usage_rules.Usage, now: str) -> list[ev.Event]:
    """RunUsageExhausted (and a cancellation for each pending intent of the run) once what an open run's agents
    reported they used (usage: the run's, domain.usage.run_usage) reaches its max cost or max tokens; nothing
    while below both, or once the run is no longer open."""
    if run.status not in ("active", "paused"):
        return []
    reached = usage_rules.reached(usage, run.max_cost_micro_usd, run.max_tokens)
    if reached is None:
        return []
    limit, maximum, used = reached
    stream = stream_of(run.run_id)
    events: list[ev.Event] = [next_event(ev.RunUsageExhausted, stream, run.version, now, run_id=run.run_id,
                                         limit=limit, max=maximum, used=used)]
    for intent_id in sorted(run.pending_intents):
        events.append(next_event(ev.IntentCancelled, stream, events[-1].version, now, intent_id=intent_id,
                                 reason=f"run {run.run_id} reached its max {limit}"))
    return events


def complete(run: Run, now: str) -> ev.Event:
    if run.status not in ("active", "paused"):
        if run.status == "opening":
            raise Refused(Code.RUN_BASE_NOT_PINNED, f"run {run.run_id} has no pinned base commit yet")
        raise RunClosed(f"run {run.run_id} is already {run.status}")
    return next_event(ev.RunCompleted, stream_of(run.run_id), run.version, now, run_id=run.run_id)


def require_open(run: Run) -> None:
    """Work can only be planned or leased inside a run that is still open."""
    if run.status not in OPEN_STATUSES:
        raise RunClosed(f"run {run.run_id} is {run.status}")
