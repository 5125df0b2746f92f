"""docket go / docket supervise: a whole multi-agent run from one command, continued after any crash."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .context import Context
from .parsing import command

__all__ = ["register", "register_supervise"]

DEFAULT_CYCLES = 3
DEFAULT_PARALLEL = 4
GO_EXIT = {"delivered": 0, "failed": 6, "stopped": 7, "waiting": 8}


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "go", go, common,
                "run an agent per task in parallel, check each result (relaunching with the failure as feedback "
                "until it passes or its cycles are spent), integrate what passed, seal the receipt "
                "(exit 0: all delivered, 6: some task failed or nothing integrated, 7: stopped, aborted or out of "
                "budget, 8: waiting for you: the target's checkout has changes where the delivered tree writes, or "
                "approval is due; the summary says what to do, then 'docket go --resume RUN')",
                "docket go --goal 'greet by name' --tasks tasks.toml --agent claude --parallel 3 --budget 2h\n"
                "  docket go --resume run-7k2m9x4q")
    p.add_argument("--goal", metavar="TEXT", help="what the run is for")
    p.add_argument("--task", action="append", metavar="TEXT", dest="task_texts",
                   help="a task (its title and prompt; repeatable; ids t1, t2, ...)")
    p.add_argument("--tasks", metavar="FILE", help="a TOML file of [[tasks]] with id, title, prompt, depends_on")
    p.add_argument("--agent", metavar="NAME", help="an [agents.NAME] of docket.toml (default: its 'agent', or the "
                                                   "only one configured)")
    p.add_argument("--target", metavar="BRANCH", help="target branch (default: docket.toml's [run] target, else the "
                                                      "branch checked out in the main checkout)")
    p.add_argument("--budget", metavar="DURATION", help="time budget of the run, e.g. 2h (active time only)")
    p.add_argument("--parallel", type=_count(64), metavar="N", help=f"agents at once (default {DEFAULT_PARALLEL})")
    p.add_argument("--cycles", type=_count(100), metavar="N",
                   help=f"attempts judged per task before it fails (default {DEFAULT_CYCLES})")
    p.add_argument("--key", metavar="KEY", help="export the sealed receipt signed with this private key (the plan "
                                                "records it: --resume exports with it)")
    p.add_argument("--id", metavar="RUN", help="the new run's id (default: a new random id)")
    p.add_argument("--resume", metavar="RUN", help="continue an unfinished run from the ledger")


def register_supervise(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "supervise", supervise, common,
                "continue every unfinished run `docket go` planned: drive pending intents, record dead workers, "
                "relaunch within their cycles, integrate and seal (--once: recover them and return)",
                "docket supervise --once")
    p.add_argument("--once", action="store_true", help="recover each unfinished run once, without launching agents")
    p.add_argument("--key", metavar="KEY", help="export each sealed receipt signed with this private key")


def _count(limit: int) -> Any:
    def parse(text: str) -> int:
        from ..domain.errors import BadInput

        if not text.isdigit() or not 1 <= int(text[:6]) <= limit or len(text) > 6:
            raise BadInput("bad-count", f"{text[:20]!r} is not a whole number from 1 to {limit}")
        return int(text)
    return parse


# --- docket go -----------------------------------------------------------------------------------------------------


def go(ctx: Context) -> int:
    a = ctx.args
    config = _config()
    if a.resume is None and a.id is not None and _exists(ctx, a.id):
        a.resume = a.id  # the same command again, after a crash: it goes on with that run
    if a.resume is not None:
        run_id = a.resume
        _check_resume(ctx, run_id, config)
    else:
        run_id = _start(ctx, config)
    return _supervise_to_end(ctx, config, run_id, parallel=a.parallel, key=a.key)


def _exists(ctx: Context, run_id: str) -> bool:
    from ..domain import run as run_aggregate

    return ctx.ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id)) is not None


def _config() -> Any:
    from ..adapters.world.config_file import find_config, load_config

    return load_config(find_config(Path.cwd()))


def _specs(ctx: Context) -> list[Any]:
    from ..domain.errors import BadInput
    from ..domain.plan import parse_tasks, tasks_from_texts
    from .parsing import UsageError

    a = ctx.args
    if a.tasks and a.task_texts:
        raise UsageError("give either --task TEXT ... or --tasks FILE, not both")
    if a.task_texts:
        return tasks_from_texts(a.task_texts)
    if a.tasks:
        import tomllib

        text = _read_tasks_file(a.tasks)
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise BadInput("bad-tasks", f"{a.tasks}: {e}") from None
        return parse_tasks(document, a.tasks)
    return []


def _read_tasks_file(name: str) -> str:
    from .text_files import read_text

    return read_text(name, limit=4 << 20, code="bad-tasks-file")


def _agent_name(config: Any, wanted: str | None) -> str:
    from ..domain.errors import BadInput, NotFound

    name = wanted or config.default_agent or (next(iter(config.agents)) if len(config.agents) == 1 else None)
    if name is None:
        raise BadInput("no-agent", "name an agent with --agent NAME (an [agents.NAME] of docket.toml)")
    if name not in config.agents:
        known = ", ".join(sorted(config.agents)) or "none"
        raise NotFound("agent-not-found", f"docket.toml has no [agents.{name}] (configured: {known})")
    return name


def _start(ctx: Context, config: Any) -> str:
    """Open the run, plan its tasks and record the plan; the run's id."""
    from ..adapters.service_layer import services
    from ..adapters.world.clock import new_id
    from ..domain.values import parse_duration
    from .parsing import UsageError

    a = ctx.args
    if not a.goal:
        raise UsageError("docket go needs --goal TEXT (or --resume RUN)")
    specs = _specs(ctx)
    if not specs:
        raise UsageError("docket go needs --task TEXT (repeatable) or --tasks FILE")
    repository = ctx.require_repository()
    agent = _agent_name(config, a.agent)
    target = a.target or config.run.target or _checked_out_target(repository)
    budget_ms = parse_duration(a.budget) if a.budget is not None else config.run.budget_ms
    export_key = _export_key(a.key)  # a bad key fails before any work
    run_id = a.id or new_id("run")
    run = services.open_run(ctx.ledger, ctx.clock, run_id=run_id, intent_id=new_id("intent"), goal=a.goal,
                            target_branch=target, budget_ms=budget_ms, repository=str(repository), wait=True,
                            effector=ctx.effector)
    if run.status == "failed":
        from ..domain.errors import Refused

        raise Refused(run.failure_code or "run-failed", run.failure_message or f"run {run_id} could not be opened")
    _plan(ctx, run_id, specs, agent, a.cycles or DEFAULT_CYCLES, a.parallel or DEFAULT_PARALLEL, export_key)
    return run_id


def _checked_out_target(repository: Path) -> str:
    """No --target and no [run] target: the branch checked out in the main checkout, said on stderr."""
    from ..adapters.world.paths import checked_out_branch, main_worktree
    from ..domain.errors import BadInput
    from .output import info, shown

    branch = checked_out_branch(repository)
    if branch is None:
        raise BadInput("no-target", "name the target branch with --target BRANCH (or set [run] target in "
                                    "docket.toml): the main checkout has no branch checked out")
    info(f"target {shown(branch)} (the branch checked out in {shown(str(main_worktree(repository)))})")
    return branch


def _export_key(key: str | None) -> tuple[str, str] | None:
    """The key id and absolute path of the private key given with --key (BadInput and NotFound as load_signer)."""
    import os

    from ..adapters.world.signing import load_signer

    if key is None:
        return None
    return load_signer(key).public_key.keyid, os.path.abspath(key)


def _plan(ctx: Context, run_id: str, specs: list[Any], agent: str, cycles: int, parallel: int,
          export_key: tuple[str, str] | None) -> None:
    """Plan each task not planned yet (its prompt stored first), then RunPlanned: safe to repeat after a crash."""
    from ..adapters.service_layer import services
    from ..adapters.world.prompts import store_prompt
    from ..domain import run as run_aggregate
    from ..domain import task as task_aggregate
    from ..domain.plan import ledger_task_id

    tasks = []
    for spec in specs:
        task_id = ledger_task_id(run_id, spec.id)
        if ctx.ledger.get(task_aggregate.apply, task_aggregate.stream_of(task_id)) is None:
            sha256, _ = store_prompt(ctx.paths.ledger.parent, spec.prompt)
            services.plan_task(ctx.ledger, ctx.clock, run_id, task_id, spec.title, prompt_sha256=sha256,
                               prompt_chars=len(spec.prompt))
        tasks.append((task_id, [ledger_task_id(run_id, d) for d in spec.depends_on]))
    ctx.ledger.decide(lambda now: run_aggregate.plan_run(services.load_run(ctx.ledger, run_id), tasks, agent, cycles,
                                                         parallel, now, export_key), ctx.clock.now())
    ctx.update_views()


def _check_resume(ctx: Context, run_id: str, config: Any) -> None:
    """A run to resume: planned (or its planning finished now from the options), its options the same."""
    from ..adapters.service_layer.services import load_run
    from ..domain.errors import Refused

    a = ctx.args
    run = load_run(ctx.ledger, run_id)
    if run.plan is None:
        specs = _specs(ctx)
        if not specs:
            raise Refused("run-not-planned", f"run {run_id} was not planned by docket go; give its --task or --tasks "
                                             "again to finish planning it")
        _plan(ctx, run_id, specs, _agent_name(config, a.agent), a.cycles or DEFAULT_CYCLES,
              a.parallel or DEFAULT_PARALLEL, _export_key(a.key))
        return
    if a.goal is not None and a.goal != run.goal:
        raise Refused("plan-differs", f"run {run_id} has another goal; resume it without --goal or with its own")
    if a.cycles is not None and a.cycles != run.plan.cycles:
        raise Refused("plan-differs", f"run {run_id} was planned with --cycles {run.plan.cycles}")
    if a.agent is not None and a.agent != run.plan.agent:
        raise Refused("plan-differs", f"run {run_id} was planned with --agent {run.plan.agent}")
    specs = _specs(ctx)
    if specs:
        from ..domain.plan import ledger_task_id

        if [ledger_task_id(run_id, s.id) for s in specs] != list(run.plan.task_ids):
            raise Refused("plan-differs", f"run {run_id} was planned with other tasks")


# --- supervising a run to its end ------------------------------------------------------------------------------------


def _settings(ctx: Context, config: Any, agent_name: str) -> Any:
    from ..adapters.service_layer.checks import CheckSpec
    from ..adapters.service_layer.go import Agent, GoSettings
    from ..adapters.world.paths import main_worktree
    from ..domain.errors import NotFound

    chosen = config.agents.get(agent_name)
    if chosen is None:
        raise NotFound("agent-not-found", f"docket.toml has no [agents.{agent_name}], the agent this run was "
                                          "planned with")
    agent = Agent(agent_name, tuple(chosen.command), chosen.prompt, dict(chosen.env), tuple(chosen.env_allow),
                  chosen.timeout_ms, chosen.idle_timeout_ms, chosen.report)
    checks = tuple(CheckSpec.of(name, check) for name, check in sorted(config.checks.items()))
    repository = ctx.require_repository()
    return GoSettings(agent=agent, checks=checks, approval=config.integration.approval,
                      docket_dir=ctx.paths.ledger.parent, repository=repository,
                      main_checkout=main_worktree(repository), ledger_path=ctx.paths.ledger,
                      artifact_dir=config.artifact_dir, setup=tuple(tuple(argv) for argv in config.worktree.setup),
                      include=tuple(config.worktree.include), ports=config.worktree.ports,
                      checked_out_target=config.integration.checked_out_target)


def _open_session(ctx: Context) -> Any:
    from ..adapters.service_layer.effector import Effector
    from ..adapters.service_layer.go import Session
    from ..adapters.service_layer.ledger import Ledger

    def open_session() -> Session:
        ledger = Ledger(ctx.paths.ledger, lock_timeout=ctx.lock_timeout)
        return Session(ledger, ctx.clock, Effector(ledger, ctx.clock), ledger.close)

    return open_session


def recover(ctx: Context, run_id: str) -> list[str]:
    """What a crash left of the run, converged: pending intents driven, its workers' processes settled (gone ones
    recorded, unsupervised ones stopped), gone supervisions ended, abandoned check runs finished."""
    from ..adapters.service_layer.supervision import reconcile_supervisions
    from ..adapters.service_layer.workers import reconcile_workers
    from ..projections import workers
    from .reconcile import settle_checks

    done = []
    ctx.effector.run_pending(after=0)
    conn = ctx.views(writable=True).conn
    running = [w["worker_id"] for w in workers.workers_of(conn, run_id) if w["status"] in ("launching", "running")]
    findings = reconcile_workers(ctx.ledger, ctx.clock, ctx.effector, running, ctx.paths.ledger, apply=True)
    findings += reconcile_supervisions(ctx.ledger, ctx.clock, ctx.effector.ports.processes, [run_id],
                                       lambda r: [w["worker_id"] for w in workers.workers_of(conn, r)], apply=True)
    done += [f"{f.kind}: {f.worker_id or 'pid ' + str(f.pid)}: {f.applied}" for f in findings]
    ctx.update_views()
    done += [f"check {s['check_id']}: {s['done']}" for s in settle_checks(ctx, stop_orphans=True)]
    ctx.update_views()
    return done


def _end_gone_supervisions(ctx: Context, run_id: str) -> None:
    from ..adapters.service_layer.supervision import reconcile_supervisions
    from ..projections import workers

    conn = ctx.views(writable=True).conn
    reconcile_supervisions(ctx.ledger, ctx.clock, ctx.effector.ports.processes, [run_id],
                           lambda r: [w["worker_id"] for w in workers.workers_of(conn, r)], apply=True)


def _supervise_to_end(ctx: Context, config: Any, run_id: str, *, parallel: int | None, key: str | None,
                      show: bool = True) -> int:
    import signal
    import threading

    from ..adapters.service_layer.go import drive_run
    from ..adapters.service_layer.services import load_run

    run = load_run(ctx.ledger, run_id)
    signer = _signer(run, key)  # a key that cannot be used fails before any work
    if run.status == "opening":  # killed before its base was pinned: pin it now
        ctx.effector.run_pending(only=set(run.pending_intents), after=0)
        run = load_run(ctx.ledger, run_id)
    assert run.plan is not None
    settings = _settings(ctx, config, run.plan.agent)
    interrupted = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: interrupted.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    view = _view(ctx, run_id)
    hooks = _Hooks(ctx, config, settings, run_id)
    _end_gone_supervisions(ctx, run_id)  # first: the downtime since a crashed supervisor's last sign is not billed

    def tick() -> None:
        view.update()
        hooks.fire()

    try:
        if run.status in ("active", "paused"):
            drive_run(_open_session(ctx), settings, run_id, interrupted=interrupted, tick=tick, parallel=parallel,
                      recover=lambda: recover(ctx, run_id), standing_by=_standing_by,
                      deliver=lambda: _deliver(ctx, settings, run_id, signer))
        ctx.update_views()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        hooks.fire(final=True)
        ctx.update_views()
        view.update()  # the run's last events (integration, receipt) before the summary
        view.close()
        ctx.update_views()
    return _summarise(ctx, run_id, interrupted=interrupted.is_set(), show=show)


def _signer(run: Any, key: str | None) -> Any:
    """The signer the run's receipt is exported with: --key's, else the key its plan records (None: no export).
    A key other than the planned one is refused, and a planned key that cannot be loaded says which key it is."""
    from ..adapters.world.signing import load_signer
    from ..domain.errors import DocketError, Refused

    planned = run.plan.export_key if run.plan is not None else None
    if key is not None:
        signer = load_signer(key)
        if planned is not None and signer.public_key.keyid != planned[0]:
            raise Refused("plan-differs", f"run {run.run_id} was planned to export with key {planned[0]} "
                                          f"({planned[1]}), not {signer.public_key.keyid}")
        return signer
    if planned is None:
        return None
    keyid, path = planned
    try:
        signer = load_signer(path)
    except DocketError as e:
        raise type(e)(e.code, f"run {run.run_id} exports its receipt with key {keyid}, planned at {path}: "
                              f"{e.message}; resume with --key naming that key's private file") from None
    if signer.public_key.keyid != keyid:
        raise Refused("plan-differs", f"run {run.run_id} exports its receipt with key {keyid}, but {path} now "
                                      f"holds key {signer.public_key.keyid}; resume with --key naming the planned "
                                      "key's private file")
    return signer


def _standing_by(why: str) -> None:
    from .output import info, shown

    info(f"standing by: {shown(why)}")


def _view(ctx: Context, run_id: str) -> Any:
    if ctx.json:  # stdout carries exactly one JSON document: the summary
        return _NoView()
    try:
        from .live import LiveView
    except ImportError:  # the live view is optional for the loop
        return _NoView()
    return LiveView(ctx, run_id)


class _Hooks:
    """docket.toml's [hooks], fired for the run's new events about once a second, and once at the end."""

    def __init__(self, ctx: Context, config: Any, settings: Any, run_id: str):
        self.ctx, self.hooks, self.settings, self.run_id = ctx, config.hooks, settings, run_id
        self.after, self.due = 0, 0.0

    def fire(self, *, final: bool = False) -> None:
        import time

        from ..adapters.service_layer.hooks import fire_hooks
        from ..domain.errors import DocketError
        from .output import warn

        if not self.hooks or (not final and time.monotonic() < self.due):
            return
        self.due = time.monotonic() + 1.0
        s = self.settings
        try:
            fired = fire_hooks(self.ctx.ledger, self.ctx.clock, self.ctx.effector, self.hooks, self.run_id,
                               docket_dir=s.docket_dir, ledger_path=s.ledger_path,
                               repository=s.main_checkout or s.repository, after=self.after)
        except DocketError as e:  # a hook never stops the run; what it did is in the ledger
            warn(e.code, f"hooks: {e.message}")
            return
        self.after = fired.examined
        for outcome in fired.outcomes:  # recorded; the user is told too, or a mistyped command goes unnoticed
            if outcome.result == "not-started":
                warn("hook-not-started", f"hook {outcome.hook} (for the event at position {outcome.position}) "
                                         f"could not start: {outcome.message or outcome.tail or 'no reason given'}")


class _NoView:
    def update(self) -> None:
        pass

    def close(self) -> None:
        pass


def _deliver(ctx: Context, settings: Any, run_id: str, signer: Any) -> None:
    """Once every task has finished: integrate what passed, seal, export, complete the run."""
    from ..adapters.service_layer.integration import integrate, load_integration
    from ..adapters.service_layer.services import complete_run, load_run, load_task
    from ..adapters.world import faults
    from ..domain.codes import Code
    from ..domain.errors import AwaitingApproval, Refused, TargetCheckedOut

    run = load_run(ctx.ledger, run_id)
    if run.status != "active" or run.plan is None:
        return
    tasks = [load_task(ctx.ledger, task_id) for task_id in run.plan.task_ids]
    if any(task.result is None for task in tasks):
        return
    passed = {task.task_id: [task.finished_binding] for task in tasks if task.result == "passed"}
    integration = load_integration(ctx.ledger, run_id)
    queued = integration is not None and integration.rolling  # a queue that went on while the agents worked
    if (passed or queued) and (integration is None or not integration.ended):
        faults.crash_point("go:before-integrate")
        try:
            integrate(ctx.ledger, ctx.clock, ctx.effector, run_id, tasks=list(run.plan.task_ids), candidates=passed,
                      checks=settings.checks, approval_required=settings.approval,
                      artifact_dir=settings.artifact_dir, docket_dir=settings.docket_dir,
                      ledger_path=settings.ledger_path, checked_out_target=settings.checked_out_target)
        except (TargetCheckedOut, AwaitingApproval) as e:  # refusals only the user can lift
            _wait(ctx, run_id, e)
            return
        except Refused as e:
            if e.code != Code.NOTHING_TO_INTEGRATE:
                raise
        ctx.update_views()
    integration = load_integration(ctx.ledger, run_id)
    if integration is not None and not integration.ended:
        return  # the target could not be moved now (checked out and dirty): resume once it can
    if integration is not None:
        from ..adapters.service_layer.receipts import seal_run

        faults.crash_point("go:before-seal")
        sealed = seal_run(ctx.ledger, ctx.ledger_reader, ctx.clock, run_id, list(run.plan.task_ids))
        if signer is not None:
            _export(ctx, sealed, signer)
    faults.crash_point("go:before-complete")
    if load_run(ctx.ledger, run_id).status == "active":
        complete_run(ctx.ledger, ctx.clock, run_id)
    ctx.update_views()


def _wait(ctx: Context, run_id: str, refused: Any) -> None:
    """RunWaiting: the run ends waiting for its user, with what to do and then how to finish it."""
    from ..adapters.service_layer.services import load_run
    from ..domain import run as run_aggregate

    then = f"'docket go --resume {run_id}'"
    message = (refused.message.replace("'docket integrate'", then) if "'docket integrate'" in refused.message
               else f"{refused.message}; then run {then}")
    ctx.ledger.decide(lambda now: run_aggregate.wait(load_run(ctx.ledger, run_id), refused.code, message, now),
                      ctx.clock.now())
    ctx.update_views()


def receipt_path(ctx: Context, run_id: str) -> Path:
    return ctx.paths.ledger.parent / "receipts" / f"{run_id}.intoto.jsonl"


def _export(ctx: Context, sealed: Any, signer: Any) -> Path:
    from ..adapters.service_layer.export import receipt_bundle
    from ..adapters.world.signing import write_bundle
    from ..domain.errors import OutputExists

    path = receipt_path(ctx, sealed.event.run_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        write_bundle(path, receipt_bundle(ctx.ledger_reader, sealed, signer))
    except OutputExists:
        pass  # exported before a crash: the same bundle (signatures are deterministic)
    return path


# --- the summary -----------------------------------------------------------------------------------------------------


def run_summary(ctx: Context, run_id: str) -> dict[str, Any]:
    from ..adapters.service_layer.candidates import load_candidate
    from ..adapters.service_layer.integration import load_integration
    from ..adapters.service_layer.services import load_run, load_task
    from ..domain.plan import short_id
    from ..projections.checks import base_checks_of

    run = load_run(ctx.ledger, run_id)
    integration = load_integration(ctx.ledger, run_id)
    steps = {step.task_id: step for step in integration.steps} if integration is not None else {}
    completed = integration is not None and integration.status == "completed"
    rows = []
    for task_id in (run.plan.task_ids if run.plan else ()):
        task = load_task(ctx.ledger, task_id)
        step = steps.get(task_id)  # its last
        if task.result == "passed":  # delivered only once its work reached the target
            result = "delivered" if step is not None and integration.delivered(step) else "passed"
        else:
            result = task.result or "unfinished"
        dropped = [{"step": s.step, "status": s.status, "code": s.code, "paths": list(s.paths[:100])}
                   for s in (integration.steps if integration is not None else ()) if s.task_id == task_id
                   and s.status in ("conflicted", "rejected")]
        checks: dict[str, str] = {}
        if task.finished_binding or task.feedback:
            binding = task.finished_binding or next((f.binding_id for f in reversed(task.feedback) if f.binding_id),
                                                    None)
            if binding:
                for check in load_candidate(ctx.ledger, binding).checks:
                    if check.result:
                        checks[check.check] = check.result
        rows.append({"task": short_id(run_id, task_id), "task_id": task_id, "title": task.title, "result": result,
                     "cycles": len(task.feedback) + (task.result == "passed"), "candidate": task.finished_binding,
                     "code": task.finished_code, "checks": checks, "conflicts": dropped})
    path = receipt_path(ctx, run_id)
    sealed = integration.receipt_sha256 if integration is not None else None
    waiting = run.waiting if run.status == "active" else None
    base = {row["check"]: {"result": row["status"], "code": row["code"], "binding_id": row["binding_id"]}
            for row in base_checks_of(ctx.views().conn, run_id)}
    return {"run_id": run_id, "status": run.status, "goal": run.goal, "target": run.target_branch,
            "waiting": {"code": waiting[0], "message": waiting[1]} if waiting else None,
            "tasks": rows, "base_checks": base, "integration": integration.status if integration else None,
            "target_commit": integration.final_commit if integration is not None and (
                completed or integration.rolling) else None,
            "overlaps": _overlaps(ctx, run_id),
            "receipt": {"sealed": sealed, "path": str(path) if path.exists() else None}}


def _overlaps(ctx: Context, run_id: str) -> list[dict[str, Any]]:
    """The same-path warnings the queue recorded: when it was prepared, and as each step was queued."""
    from ..domain import events as ev
    from ..domain import integration as integration_aggregate

    found: list[dict[str, Any]] = []
    for _, event in ctx.ledger.history(integration_aggregate.stream_of(run_id)):
        if isinstance(event, ev.IntegrationPrepared | ev.IntegrationPreparedV2 | ev.IntegrationStepQueued):
            found += [o.model_dump() for o in event.overlaps if o.model_dump() not in found]  # a repair warns again
    return found


def _summarise(ctx: Context, run_id: str, *, interrupted: bool, show: bool = True) -> int:
    from .output import emit, shown
    from .status import base_check_lines

    doc = run_summary(ctx, run_id)
    if interrupted or doc["status"] in ("aborted", "budget-limited", "paused"):
        outcome = "stopped"
    elif doc["tasks"] and all(row["result"] == "delivered" for row in doc["tasks"]):
        outcome = "delivered"
    elif doc["waiting"]:
        outcome = "waiting"
    else:
        outcome = "failed"
    doc["outcome"] = outcome
    lines = [f"run {shown(run_id)}: {outcome} ({doc['status']})"]
    for row in doc["tasks"]:
        checks = ", ".join(f"{name} {result}" for name, result in sorted(row["checks"].items())) or "no checks"
        candidate = row["candidate"][:12] if row["candidate"] else "-"
        why = f" [{row['code']}]" if row["code"] else ""
        lines.append(f"  {shown(row['task'])}: {row['result']}{why}, {row['cycles']} cycle(s), candidate {candidate}, "
                     f"{checks}")
        for dropped in row["conflicts"]:
            what = "conflicted with the integrated head" if dropped["status"] == "conflicted" else (
                "failed its checks merged with the integrated head")
            paths = f" on {', '.join(shown(p) for p in dropped['paths'][:10])}" if dropped["paths"] else ""
            lines.append(f"    step {dropped['step']} {what}{paths} ({shown(dropped['code'] or '')}): dropped"
                         + ("; delivered after repair" if row["result"] == "delivered" else ""))
    for overlap in doc["overlaps"]:
        lines.append(f"  warning: {shown(overlap['first_task'])} and {shown(overlap['second_task'])} change the same "
                     f"paths: {', '.join(shown(p) for p in overlap['paths'][:10])}")
    lines += base_check_lines([{"check": name, "status": b["result"], "code": b["code"]}
                               for name, b in sorted(doc["base_checks"].items())])
    if doc["target_commit"]:
        lines.append(f"  {shown(doc['target'])} -> {doc['target_commit']}"
                     + ("" if doc["integration"] == "completed" else f" (integration {doc['integration']})"))
    elif doc["integration"]:
        lines.append(f"  integration {doc['integration']}; {shown(doc['target'])} not moved")
    if doc["receipt"]["path"]:
        lines.append(f"  receipt: {shown(doc['receipt']['path'])}")
    if outcome == "waiting":
        lines.append(f"  waiting for you ({doc['waiting']['code']}): {shown(doc['waiting']['message'])}")
    if show:
        emit(ctx.json, doc, "\n".join(lines))
    return GO_EXIT[outcome]


# --- docket supervise ----------------------------------------------------------------------------------------------


def supervise(ctx: Context) -> int:
    from ..adapters.service_layer.services import load_run
    from ..projections import runs
    from .output import emit, shown

    conn = ctx.views(writable=True).conn
    unfinished = [row["run_id"] for row in runs.list_runs(conn)
                  if row["status"] in ("active", "paused") and row.get("plan")]
    config = _config() if unfinished and not ctx.args.once else None
    documents = []
    code = 0
    for run_id in unfinished:
        found = recover(ctx, run_id)
        if ctx.args.once:
            documents.append({"run_id": run_id, "recovered": found})
            continue
        code = max(code, _supervise_to_end(ctx, config, run_id, parallel=None, key=ctx.args.key, show=not ctx.json))
        documents.append({"run_id": run_id, "status": load_run(ctx.ledger, run_id).status})
    lines = [f"{len(unfinished)} unfinished run(s)"]
    for doc in documents:
        lines.append(f"  {shown(doc['run_id'])}: " + (", ".join(doc.get("recovered", [])) or "nothing to recover"
                                                      if ctx.args.once else doc["status"]))
    if ctx.args.once or ctx.json:
        emit(ctx.json, {"runs": documents}, "\n".join(lines))
    return code
