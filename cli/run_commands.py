"""docket run / task / worker / lease: append facts, drive intents, print them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..adapters import faults, services
from ..adapters.clock import new_id
from ..domain.errors import NotFound, OutcomeUnknown, Refused
from ..domain.events import Event
from ..domain.values import format_duration, parse_duration
from .context import Context
from .output import emit, shown


def _recorded(ctx: Context, appended: services.Appended, human: str, **extra: Any) -> int:
    """Bring the views up to what was just recorded (or warn that they are behind), then print it."""
    ctx.update_views()
    emit(ctx.json, {**extra, "events": [_event_doc(p, e) for p, e in appended.events]}, shown(human))
    return 0


def _event_doc(position: int, event: Event) -> dict[str, Any]:
    return {"position": position, "type": event.type_name(), "stream": event.stream,
            "recorded_at": event.recorded_at, "payload": event.payload()}


def run_open(ctx: Context) -> int:
    a = ctx.args
    budget_ms = None if a.budget is None else parse_duration(a.budget)
    repository = ctx.repository
    if repository is None:
        raise NotFound("not-a-repository", "run 'docket run open' inside the git repository the run targets")
    run_id = a.id or new_id("run")
    appended = services.open_run(ctx.ledger, ctx.clock, run_id=run_id, intent_id=new_id("intent"), goal=a.goal,
                                 target_branch=a.target, budget_ms=budget_ms, repository=str(repository))
    faults.crash_point("run-open:after-intent")
    intent_position, intent = appended.last
    if not a.no_wait:  # its own intent, found by its position: another's unknown holds it not back
        ctx.effector.run_pending(only={intent.intent_id}, after=intent_position - 1)
    run = services.load_run(ctx.ledger, run_id)
    ctx.update_views()
    if run.status == "failed":
        failed = NotFound if run.failure_code == "unknown-branch" else Refused
        raise failed(run.failure_code or "base-pin-failed", run.failure_message or "the base could not be pinned")
    if not a.no_wait and intent.intent_id in run.pending_intents:
        raise OutcomeUnknown("outcome-unknown",
                             f"run {run_id} is recorded but its base pin is not known yet; 'docket replay --apply' observes again")
    doc = {"run": _run_doc(run), "intent": {"intent_id": intent.intent_id, "pending": intent.intent_id in run.pending_intents}}
    if run.base_commit:
        human = f"run {run_id} opened on {run.target_branch} at {run.base_commit[:12]}"
    else:
        human = f"run {run_id} opened; base pin pending (intent {intent.intent_id})"
    emit(ctx.json, doc, shown(human))
    return 0


def _run_doc(run: Any) -> dict[str, Any]:
    return {"run_id": run.run_id, "status": run.status, "goal": run.goal, "target_branch": run.target_branch,
            "base_commit": run.base_commit, "budget_ms": run.budget_ms}


def run_pause(ctx: Context) -> int:
    appended = services.pause_run(ctx.ledger, ctx.clock, ctx.args.run, ctx.args.reason)
    return _recorded(ctx, appended, f"run {ctx.args.run} paused")


def run_resume(ctx: Context) -> int:
    appended = services.resume_run(ctx.ledger, ctx.clock, ctx.args.run)
    return _recorded(ctx, appended, f"run {ctx.args.run} resumed")


def run_abort(ctx: Context) -> int:
    appended = services.abort_run(ctx.ledger, ctx.clock, ctx.args.run, ctx.args.reason)
    cancelled = [e.intent_id for _, e in appended.events if e.type_name() == "IntentCancelled.v1"]
    human = f"run {ctx.args.run} aborted" + (f"; cancelled pending intent(s) {', '.join(cancelled)}" if cancelled else "")
    return _recorded(ctx, appended, human, cancelled_intents=cancelled)


def run_complete(ctx: Context) -> int:
    appended = services.complete_run(ctx.ledger, ctx.clock, ctx.args.run)
    return _recorded(ctx, appended, f"run {ctx.args.run} completed")


def task_plan(ctx: Context) -> int:
    task_id = ctx.args.id or new_id("task")
    appended = services.plan_task(ctx.ledger, ctx.clock, ctx.args.run, task_id, ctx.args.title)
    return _recorded(ctx, appended, f"task {task_id} planned in run {ctx.args.run}", task_id=task_id)


def worker_register(ctx: Context) -> int:
    a = ctx.args
    worker_id = a.id or new_id("worker")
    appended = services.register_worker(ctx.ledger, ctx.clock, a.run, worker_id, a.role, a.task)
    return _recorded(ctx, appended, f"worker {worker_id} registered in run {a.run} (generation 1)",
                     worker_id=worker_id, generation=1)


def worker_relaunch(ctx: Context) -> int:
    appended = services.relaunch_worker(ctx.ledger, ctx.clock, ctx.args.worker)
    event = appended.last[1]
    return _recorded(ctx, appended, f"worker {ctx.args.worker} relaunched: generation {event.generation} "
                     f"(generation {event.fenced_generation} fenced)", generation=event.generation)


def _resource(text: str) -> str:
    """The resource's one name: a relative one is relative to the repository root, not the working directory."""
    from ..adapters.paths import repository_root
    from ..domain.names import normalise_resource

    root = repository_root(Path.cwd())
    return normalise_resource(text, None if root is None else str(root))


def lease_grant(ctx: Context) -> int:
    a = ctx.args
    a.resource = _resource(a.resource)
    ttl_ms = parse_duration(a.ttl)
    appended = services.grant_lease(ctx.ledger, ctx.clock, a.resource, a.worker, a.generation, ttl_ms)
    token, event = appended.last
    return _recorded(ctx, appended, f"lease on {a.resource} granted to {a.worker} generation {a.generation}: "
                     f"token {token}, expires {event.expires_at} ({format_duration(ttl_ms)})", token=token)


def lease_renew(ctx: Context) -> int:
    a = ctx.args
    a.resource = _resource(a.resource)
    appended = services.renew_lease(ctx.ledger, ctx.clock, a.resource, a.token, parse_duration(a.ttl))
    return _recorded(ctx, appended, f"lease on {a.resource} (token {a.token}) renewed until {appended.last[1].expires_at}")


def lease_release(ctx: Context) -> int:
    ctx.args.resource = _resource(ctx.args.resource)
    appended = services.release_lease(ctx.ledger, ctx.clock, ctx.args.resource, ctx.args.token)
    return _recorded(ctx, appended, f"lease on {ctx.args.resource} (token {ctx.args.token}) released")


def lease_expire(ctx: Context) -> int:
    ctx.args.resource = _resource(ctx.args.resource)
    appended = services.expire_lease(ctx.ledger, ctx.clock, ctx.args.resource)
    return _recorded(ctx, appended, f"lease on {ctx.args.resource} recorded as expired")
