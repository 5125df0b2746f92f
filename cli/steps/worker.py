"""docket worker register / relaunch / launch / stop / logs."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group, position
from ..console.recorded import recorded

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    worker = group(nouns, "worker", "launch, supervise and stop workers",
                   "docket worker launch run-7k2m9x4q --task task-1 --agent aider")
    p = command(worker, "launch", worker_launch, common,
                "launch a task's agent in its own worktree and supervise it until it ends "
                "(or, after --, any command instead of a configured agent)",
                "docket worker launch run-7k2m9x4q --task task-1 --agent aider\n"
                "  docket worker launch run-7k2m9x4q --task task-2 -- ./scripts/agent.sh --fast")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--task", required=True, metavar="TASK", help="the task the agent works on")
    p.add_argument("--agent", metavar="NAME", help="an [agents.NAME] of docket.toml (default: its 'agent', or "
                                                   "the only one configured)")
    p.add_argument("--id", metavar="WORKER", help="the worker's id (default: the task's id)")
    p.set_defaults(command=None)  # `-- COMMAND ...` after the options: run it instead of a configured agent
    p = command(worker, "stop", worker_stop, common,
                "stop a worker's process group (SIGTERM, then SIGKILL after a grace period)",
                "docket worker stop task-1")
    p.add_argument("worker", metavar="WORKER", help="the worker id")
    p.add_argument("--no-wait", action="store_true", help="record the stop request only; its supervisor acts on it")
    p = command(worker, "logs", worker_logs, common,
                "print a worker's output (control characters escaped; --json: its digest, size and redacted tail)",
                "docket worker logs task-1 --follow")
    p.add_argument("worker", metavar="WORKER", help="the worker id")
    p.add_argument("--generation", type=position, metavar="N", help="a past generation (default: the current one)")
    p.add_argument("--follow", action="store_true", help="keep printing new output until the worker ends")
    p = command(worker, "register", worker_register, common, "register a worker at generation 1",
                "docket worker register run-7k2m9x4q --role implementer --task task-1")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--role", required=True, metavar="ROLE", help="e.g. implementer, reviewer, integrator")
    p.add_argument("--task", metavar="TASK", help="the task it works on (in the same run)")
    p.add_argument("--id", metavar="WORKER", help="worker id (default: a new random id)")
    p = command(worker, "relaunch", worker_relaunch, common, "raise a worker's generation, fencing the old one",
                "docket worker relaunch worker-1")
    p.add_argument("worker", metavar="WORKER", help="the worker id")


def worker_register(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.worker_generations import register_worker
    from ...adapters.world.clock import new_id

    a = ctx.args
    worker_id = a.id or new_id("worker")
    task = None if a.task is None else ctx.task_id(a.run, a.task)
    appended = register_worker(ctx.ledger, ctx.clock, a.run, worker_id, a.role, task)
    return recorded(ctx, appended, f"worker {worker_id} registered in run {a.run} (generation 1)",
                    worker_id=worker_id, generation=1)


def worker_relaunch(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.worker_generations import relaunch_worker
    from ...domain.events import WorkerRelaunched

    ctx.args.worker = ctx.worker_id(ctx.args.worker)
    appended = relaunch_worker(ctx.ledger, ctx.clock, ctx.args.worker)
    event = appended.last[1]
    assert isinstance(event, WorkerRelaunched)  # what a relaunch records
    return recorded(ctx, appended, f"worker {ctx.args.worker} relaunched: generation {event.generation} "
                    f"(generation {event.fenced_generation} fenced)", generation=event.generation)


def worker_launch(ctx: Context) -> int:
    from ...adapters.world.processes.process_tree import become_subreaper

    become_subreaper()  # what the agents, checks and hooks it launches leave is adopted here, and stopped
    from ...adapters.service_layer.use_cases.supervisor import supervise
    from ...adapters.service_layer.use_cases.workers import launch_worker
    from .agents import launch_request
    from ..console.output import emit, shown

    a = ctx.args
    a.task = ctx.task_id(a.run, a.task)
    request, limits = launch_request(ctx, a.run, a.task, a.id or a.task, a.agent, a.command or [])
    repository = ctx.require_repository()
    from ...adapters.world.git.own_repositories import require_borrowable
    from ...adapters.world.files.paths import main_worktree

    require_borrowable(repository)

    effector = ctx.effector
    launched = launch_worker(ctx.ledger, ctx.clock, effector, effector.ports.launcher, request,
                             docket_dir=ctx.paths.ledger.parent, repository=repository,
                             main_checkout=main_worktree(repository), ledger_path=ctx.paths.ledger)
    ctx.update_views()
    if not ctx.json:
        from ..console.output import info

        info(f"worker {shown(launched.worker_id)} generation {launched.generation} running as pid "
             f"{launched.process.pid} in {shown(launched.worktree)}; log {shown(launched.log_path)}")
    (ended,) = supervise(ctx.ledger, ctx.clock, effector, [(launched, limits)], supervisions=launched.supervisions)
    ctx.update_views()
    doc = {"worker_id": launched.worker_id, "run_id": launched.run_id, "task_id": launched.task_id,
           "generation": launched.generation, "process": launched.process.as_dict(),
           "worktree": str(launched.worktree), "log_path": str(launched.log_path), "result": ended.result,
           "cause": ended.cause, "exit_code": ended.exit_code, "signal": ended.signal,
           "pin": _pin_document(ended)}
    how = (f"exit code {ended.exit_code}" if ended.exit_code is not None
           else f"signal {ended.signal}" if ended.signal is not None else "an unknown status")
    emit(ctx.json, doc, f"worker {shown(launched.worker_id)} generation {launched.generation}: {ended.result} "
                        f"({ended.cause}, {how}); {_pin_line(ended)}")
    return {"ok": 0, "failed": 6, "stopped": 7}[ended.result]


def _pin_document(ended: Any) -> dict[str, Any]:
    if ended.pin_error is not None:
        return {"result": "error", "code": ended.pin_error.code, "message": ended.pin_error.message}
    pinned = ended.pinned
    if pinned is None:
        return {"result": "not-pinned"}
    doc: dict[str, Any] = {"result": pinned.result, "head": pinned.head, "tree": pinned.tree,
                           "differing_paths": list(pinned.differing)}
    if pinned.candidate is not None:
        from .candidate import candidate_document

        doc["candidate"] = candidate_document(pinned.candidate)
    return doc


def _pin_line(ended: Any) -> str:
    if ended.pin_error is not None:
        return f"not pinned ({ended.pin_error.code}: {ended.pin_error.message})"
    pinned = ended.pinned
    if pinned is None:
        return "not pinned"
    if pinned.result == "unchanged":
        return "nothing changed in its worktree: nothing pinned"
    if pinned.result == "unstable":
        return f"its worktree changed between two captures ({len(pinned.differing)} path(s)): nothing pinned"
    c = pinned.candidate
    return f"pinned candidate {c.binding_id[:12]} (commit {c.commit[:12]}, {len(c.changed_paths)} changed path(s))"


def worker_stop(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.worker_generations import load_worker
    from ...adapters.service_layer.use_cases.workers import finish_stop, request_stop
    from ..console.output import emit, shown

    a = ctx.args
    a.worker = ctx.worker_id(a.worker)
    worker = load_worker(ctx.ledger, a.worker)
    if worker.status not in ("launching", "running"):  # ended already (or never launched): what was asked holds
        emit(ctx.json, {"worker_id": a.worker, "intent_id": None, "result": "not-running", "status": worker.status},
             f"worker {shown(a.worker)}: nothing to stop (generation {worker.generation} {shown(worker.status)})")
        return 0
    intent_id = request_stop(ctx.ledger, ctx.clock, a.worker, "requested")
    result = "requested"
    if not a.no_wait and intent_id is not None:
        result = finish_stop(ctx.ledger, ctx.clock, ctx.effector, a.worker, intent_id)
    ctx.update_views()
    emit(ctx.json, {"worker_id": a.worker, "intent_id": intent_id, "result": result},
         f"worker {shown(a.worker)}: stop {result}")
    return 4 if result == "unknown" else 0


def worker_logs(ctx: Context) -> int:
    from .logs import print_log

    return print_log(ctx, ctx.worker_id(ctx.args.worker), ctx.args.generation, follow=ctx.args.follow)
