"""`docket go`: one process supervises a planned run to its end, and a second one after a crash finishes it.

Everything it decides is read back from the ledger, so a fresh process (``--resume``,
``docket supervise``) takes up exactly where a killed one stopped:

- The main loop starts a task's work when what it depends on passed, at most
  ``parallel`` at once, and watches the run: paused (its agents are stopped and
  relaunched on resume), aborted, or out of budget (RunBudgetExhausted).
- A task's work runs in its own thread with its own ledger connection: launch
  the agent for the next generation (a dependent task's worktree starts from the
  merge of its dependencies' candidates), supervise it to its end, then judge
  the generation: pin its worktree, run the required checks on the candidate,
  and hand it off (TaskFinished passed) or record why it failed
  (TaskFeedbackRecorded, whose text the next generation's prompt carries) until
  the task's cycles are spent (TaskFinished failed).
- A generation docket itself ended (the run paused, its supervisor gone, its end
  unknown) is not judged and spends no cycle: the next generation carries on in
  the same worktree.
- The merge queue goes on while agents work (unless approval is required): a
  task whose candidate is confirmed is queued (after the tasks it depends on are
  integrated) and takes no slot while its step waits; an integrator thread merges and
  re-verifies each step and moves the target as verified steps accumulate. A
  verified step finishes its task (passed); a step that conflicts or is rejected
  is dropped, the rest goes on, and the task gets the conflict as feedback: its
  next generation starts from the integrated head, within its cycles.
- When every task has finished, the queue is closed and driven to its end (with
  approval required: the passed tasks are integrated only then, in task order),
  the receipt is sealed (and exported when a key is given), and the run completed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...domain import candidate as candidate_aggregate
from ...domain import run as run_aggregate
from ...domain import task as task_aggregate
from ...domain import worker as worker_aggregate
from ...domain.codes import Code
from ...domain.errors import DependenciesUnsettled, DocketError, Refused, RunClosed, TargetCheckedOut
from ..world import faults
from ..world.clock import Clock
from .checks import CheckSpec
from .ledger import Ledger
from .services import load_run, load_task

__all__ = ["Agent", "GoSettings", "Session", "drive_run", "judgeable", "task_worker_id"]

TICK_SECONDS = 0.25
STANDBY_SECONDS = 1.0
DRIVER_TTL_MS = 60_000  # the run's driver lease; renewed every third of that
JUDGED_CAUSES = frozenset({"exited", "timeout", "idle-timeout"})


@dataclass(frozen=True)
class Agent:
    """How to start the plan's agent (docket.toml's [agents.NAME])."""

    name: str
    command: tuple[str, ...]
    prompt_mode: str = "argument"
    env: Mapping[str, str] = field(default_factory=dict)
    env_allow: tuple[str, ...] = ()
    timeout_ms: int | None = None
    idle_timeout_ms: int | None = None
    report: str = "none"


@dataclass(frozen=True)
class GoSettings:
    agent: Agent
    checks: tuple[CheckSpec, ...]  # every configured check; the required ones judge a candidate
    approval: bool
    docket_dir: Path
    repository: Path  # the git common dir
    main_checkout: Path | None
    ledger_path: Path
    artifact_dir: str | None = None
    setup: tuple[tuple[str, ...], ...] = ()
    include: tuple[str, ...] = ()
    ports: bool = False
    checked_out_target: str = "update"  # a target checked out in a clean worktree: update it with the branch

    @property
    def required(self) -> tuple[CheckSpec, ...]:
        return tuple(spec for spec in self.checks if spec.required)


@dataclass
class Session:
    """A ledger connection with its clock and effector, for one thread."""

    ledger: Ledger
    clock: Clock
    effector: Any
    close: Callable[[], None] = lambda: None


def task_worker_id(task_id: str) -> str:
    return task_id  # one worker per task, raised a generation per attempt


def judgeable(worker: worker_aggregate.Worker) -> bool:
    """Whether the generation's end says something about the agent's work: it exited by itself, ran out of time,
    could not start, or someone stopped it on purpose. docket's own stops (pause, supervisor gone) and unknown ends
    are not judged."""
    if worker.status == "launch-failed":
        return worker.exit_cause != "cancelled"
    if worker.status != "exited":
        return False
    return worker.exit_cause in JUDGED_CAUSES or (worker.exit_cause == "stopped" and worker.stop_reason == "requested")


# --- the main loop -------------------------------------------------------------------------------------------------


def drive_run(open_session: Callable[[], Session], settings: GoSettings, run_id: str, *,
              interrupted: threading.Event, tick: Callable[[], None] = lambda: None,
              parallel: int | None = None, recover: Callable[[], None] = lambda: None,
              standing_by: Callable[[str], None] = lambda _: None,
              deliver: Callable[[], None] = lambda: None) -> None:
    """Supervise the planned run until every task has finished, or the run stops, or ``interrupted`` is set.

    One supervisor drives a run: it holds the run's driver lease. Another one stands by (``standing_by`` is told
    why, once) until that lease is released or its holder is positively gone, then calls ``recover`` and takes
    over. Once every task has finished, ``deliver`` runs while the lease is held. ``parallel``: agents at once
    (default: the plan's)."""
    from .supervision import begin_supervision, end_supervision

    s = open_session()
    threads: dict[str, threading.Thread] = {}
    errors: list[BaseException] = []
    changed = threading.Event()
    finished: dict[str, str] = {}  # task id -> result, once read
    supervisions = begin_supervision(s.ledger, s.clock, s.effector.ports.processes, {run_id})
    token = None
    integrating = threading.Event()
    integrator = None
    try:
        token = _claim_driver(s, run_id, supervisions.get(run_id), interrupted, tick, standing_by)
        if token is None:
            return
        recover()
        if not settings.approval:
            integrating.set()
            integrator = threading.Thread(target=_integrate_while_working,
                                          args=(open_session, settings, run_id, integrating, errors, changed),
                                          name=f"docket-integrator-{run_id}", daemon=True)
            integrator.start()
        renew_at = time.monotonic() + DRIVER_TTL_MS / 3000
        while not interrupted.is_set():
            run = load_run(s.ledger, run_id)
            if run.status not in ("active", "paused") or (run.remaining_ms(s.clock.now()) == 0
                                                          and _out_of_budget(s, run_id)):
                break
            if time.monotonic() >= renew_at:
                renew_at = time.monotonic() + DRIVER_TTL_MS / 3000
                _renew_driver(s, run_id, token)
            threads = {task: thread for task, thread in threads.items() if thread.is_alive()}
            if errors:
                raise errors[0]
            if run.status == "active" and not _start_work(open_session, settings, s, run, threads, errors,
                                                          parallel or run.plan.parallel, interrupted, changed,
                                                          finished):
                if not threads:
                    break
            tick()
            changed.wait(TICK_SECONDS)  # a task's thread ending wakes the loop at once
            changed.clear()
        if not interrupted.is_set():  # every task finished, or the run stopped: its agents stop themselves
            for thread in threads.values():
                thread.join()
            _stop_integrator(integrating, integrator)
            if errors:
                raise errors[0]
        if not interrupted.is_set():
            deliver()  # still the driver: no other supervisor integrates, seals or completes the run meanwhile
    finally:
        if interrupted.is_set():
            _stop_workers(s, threads)
        for thread in threads.values():
            thread.join()
        _stop_integrator(integrating, integrator)
        if token is not None:
            _release_driver(s, run_id, token)
        end_supervision(s.ledger, s.clock, supervisions)
        s.close()
    if errors:
        raise errors[0]


def _integrate_while_working(open_session: Callable[[], Session], settings: GoSettings, run_id: str,
                             integrating: threading.Event, errors: list[BaseException],
                             changed: threading.Event) -> None:
    """The integrator: while the run's agents work, merge and re-verify each queued step and move the target as
    verified steps accumulate (a target whose checkout is in the way is left for the end)."""
    from ...domain.errors import OutcomeUnknown
    from .integration import advance, load_integration

    s = open_session()
    move_target = True
    try:
        while integrating.is_set():
            integration = load_integration(s.ledger, run_id)
            if (integration is not None and integration.rolling and not integration.ended
                    and load_run(s.ledger, run_id).status == "active"):
                try:
                    advance(s.ledger, s.clock, s.effector, run_id, checks=settings.checks,
                            artifact_dir=settings.artifact_dir, docket_dir=settings.docket_dir,
                            ledger_path=settings.ledger_path, checked_out_target=settings.checked_out_target,  # type: ignore[arg-type]
                            move_target=move_target)
                except (OutcomeUnknown, RunClosed):
                    pass  # observed again on the next pass
                except TargetCheckedOut:
                    move_target = False  # the end of the run says so, and waits for the user
            time.sleep(TICK_SECONDS)
    except BaseException as e:  # the main loop re-raises it
        errors.append(e)
    finally:
        changed.set()
        s.close()


def _stop_integrator(integrating: threading.Event, integrator: threading.Thread | None) -> None:
    integrating.clear()
    if integrator is not None:
        integrator.join()


def driver_resource(run_id: str) -> str:
    return f"driver/{run_id}"


def _claim_driver(s: Session, run_id: str, supervision_id: str | None, interrupted: threading.Event,
                  tick: Callable[[], None], standing_by: Callable[[str], None]) -> int | None:
    """The run's driver lease for this supervisor (its token), once no live supervisor holds it; None when the
    run closed or this process was interrupted while it stood by.

    The lease's holder is a worker with role "supervisor" named by this process's supervision id, so whether the
    holder lives is whether the docket process of that supervision (RunSupervised) lives."""
    from ...domain import lease as lease_aggregate
    from .services import register_worker

    if supervision_id is None:
        return None  # the run closed before it could be supervised
    register_worker(s.ledger, s.clock, run_id, supervision_id, "supervisor", None)
    resource = driver_resource(run_id)
    told = False
    processes = s.effector.ports.processes
    while not interrupted.is_set():
        def decision(now: str) -> Any:
            lease = s.ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(resource))
            run = load_run(s.ledger, run_id)
            holder = None if lease is None else s.ledger.get(worker_aggregate.apply,
                                                             worker_aggregate.stream_of(lease.worker_id))
            liveness = "none"
            if lease is not None and lease.status == "held":
                held_by = next((x.supervisor for x in run.supervisions if x.supervision_id == lease.worker_id), None)
                liveness = "dead" if held_by is None else processes.liveness(held_by)
            me = s.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(supervision_id))
            return lease_aggregate.grant(lease, holder, me, 1, run, resource, DRIVER_TTL_MS, now, liveness)

        try:
            ((position, _),) = s.ledger.decide(decision, s.clock.now())
            return position
        except RunClosed:
            return None
        except Refused as e:
            if e.code not in (Code.LEASE_HELD, Code.LEASE_HOLDER_UNKNOWN):
                raise
            if not told:
                standing_by(e.message)
                told = True
        tick()
        time.sleep(STANDBY_SECONDS)
    return None


def _renew_driver(s: Session, run_id: str, token: int) -> None:
    from .services import renew_lease

    try:
        renew_lease(s.ledger, s.clock, driver_resource(run_id), token, DRIVER_TTL_MS)
    except DocketError:
        pass  # the lease is reclaimed only once this process is positively gone: it is not


def _release_driver(s: Session, run_id: str, token: int) -> None:
    from .services import release_lease

    try:
        release_lease(s.ledger, s.clock, driver_resource(run_id), token)
    except DocketError:
        pass


def _start_work(open_session: Callable[[], Session], settings: GoSettings, s: Session, run: run_aggregate.Run,
                threads: dict[str, threading.Thread], errors: list[BaseException], parallel: int,
                interrupted: threading.Event, changed: threading.Event, finished: dict[str, str]) -> bool:
    """Start the work each ready task may start; whether any task is still unfinished.

    ``finished`` keeps the results already read (a finished task stays finished), so a pass reads only the tasks
    that may start now, and stops reading once every slot is taken."""
    assert run.plan is not None
    unfinished = False
    queued = _queued_tasks(s, run.run_id)
    for task_id, depends_on in run.plan.tasks:
        if task_id in finished:
            continue
        if task_id in threads or task_id in queued:  # a queued task takes no slot: its step is the integrator's
            unfinished = True
            continue
        if len(threads) >= parallel:
            return True  # no slot: the rest waits for the next pass
        result = load_task(s.ledger, task_id).result
        if result is not None:
            finished[task_id] = result
            continue
        unfinished = True
        results = [finished.get(dependency) for dependency in depends_on]  # dependencies come first in the plan
        if "failed" in results:
            failed = [d for d, r in zip(depends_on, results) if r == "failed"]
            _finish(s, task_id, "failed", None, "dependency-failed", f"it depends on {', '.join(failed)}, which failed")
            continue
        if None in results:
            continue
        thread = threading.Thread(target=_guarded, args=(open_session, settings, run.run_id, task_id, errors,
                                                         interrupted, changed),
                                  name=f"docket-task-{task_id}", daemon=True)
        threads[task_id] = thread
        thread.start()
    return unfinished


def _out_of_budget(s: Session, run_id: str) -> bool:
    """Record RunBudgetExhausted once the run's budget is spent; whether it is."""
    appended = s.ledger.decide(lambda now: run_aggregate.exhaust_budget(load_run(s.ledger, run_id), now),
                               s.clock.now())
    return bool(appended)


def _stop_workers(s: Session, threads: Mapping[str, threading.Thread]) -> None:
    """This supervisor is leaving: stop the agents it supervises (not judged: the next one relaunches them)."""
    from .workers import request_stop

    for task_id in threads:
        worker = s.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(task_worker_id(task_id)))
        if worker is not None and worker.status in ("launching", "running"):
            try:
                request_stop(s.ledger, s.clock, worker.worker_id, "supervisor-gone")
            except DocketError:
                pass


def _guarded(open_session: Callable[[], Session], settings: GoSettings, run_id: str, task_id: str,
             errors: list[BaseException], interrupted: threading.Event, changed: threading.Event) -> None:
    try:
        work_on(open_session, settings, run_id, task_id, interrupted)
    except BaseException as e:  # the main loop re-raises it: a bug must not pass for a finished task
        errors.append(e)
    finally:
        changed.set()


# --- one task's work -----------------------------------------------------------------------------------------------


def work_on(open_session: Callable[[], Session], settings: GoSettings, run_id: str, task_id: str,
            interrupted: threading.Event | None = None) -> None:
    """Attempt the task, generation after generation, until it finishes, its run is no longer active, or this
    supervisor is interrupted."""
    s = open_session()
    try:
        while interrupted is None or not interrupted.is_set():
            run = load_run(s.ledger, run_id)
            task = load_task(s.ledger, task_id)
            if run.status != "active" or task.result is not None:
                return
            assert run.plan is not None
            worker = s.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(task_worker_id(task_id)))
            if worker is not None and worker.status in ("launching", "running"):
                return  # a generation another docket process supervises, or one reconcile has not settled
            if worker is not None and judgeable(worker) and not task.judged(worker.generation):
                if task_id in _queued_tasks(s, run_id, worker.generation):
                    return  # its step is the integrator's: it finishes the task, or drops it and the task goes on
                _judge(s, settings, run, task, worker)
                continue
            if len(task.feedback) >= run.plan.cycles:
                last = task.feedback[-1] if task.feedback else None
                _finish(s, task_id, "failed", None, last.code if last else "no-cycles",
                        f"{len(task.feedback)} cycle(s) spent; the last: {last.feedback if last else 'none'}")
                return
            if not _attempt(s, settings, run, task):
                return
    finally:
        s.close()


def _attempt(s: Session, settings: GoSettings, run: run_aggregate.Run, task: task_aggregate.Task) -> bool:
    """Launch the next generation and supervise it to its end; False when it could not be launched for now."""
    from .supervisor import Limits, supervise
    from .workers import LaunchRequest, launch_worker

    base = None
    repair = _repair_base(s, task)
    if repair is not None and task.worktree is not None and task.base != repair:
        from .housekeeping import remove_task_worktree

        faults.crash_point("go:before-repair")  # its candidate keeps the work: the worktree is made again
        remove_task_worktree(s.ledger, s.clock, s.effector, s.effector.ports.processes, task.task_id,
                             [task.feedback[-1].binding_id or ""], artifact_dir=settings.artifact_dir)
        task = load_task(s.ledger, task.task_id)
    if task.worktree is None and task.worktree_intent is None:
        base = repair or _start_commit(s, settings, run, task)
        if base is False:
            return True  # finished failed: its dependencies do not merge
    agent = settings.agent
    request = LaunchRequest(run_id=run.run_id, task_id=task.task_id, worker_id=task_worker_id(task.task_id),
                            agent=agent.name, command=agent.command, prompt_mode=agent.prompt_mode, env=agent.env,
                            env_allow=agent.env_allow, setup=settings.setup, include=settings.include,
                            ports=settings.ports, artifact_dir=settings.artifact_dir, pin_on_exit=False,
                            base=base or None, report=agent.report)
    faults.crash_point("go:before-launch")
    try:
        launched = launch_worker(s.ledger, s.clock, s.effector, s.effector.ports.launcher, request,
                                 docket_dir=settings.docket_dir, repository=settings.repository,
                                 main_checkout=settings.main_checkout, ledger_path=settings.ledger_path)
    except RunClosed:
        return False
    except Refused as e:
        if e.code in (Code.WORKER_RUNNING, Code.LAUNCHED_ELSEWHERE, Code.LEASE_HELD, Code.LEASE_HOLDER_UNKNOWN):
            return False
        raise
    except DocketError as e:
        if e.code == Code.SETUP_FAILED:
            _finish(s, task.task_id, "failed", None, Code.SETUP_FAILED, e.message)
            return True
        raise
    supervise(s.ledger, s.clock, s.effector, [(launched, Limits(agent.timeout_ms, agent.idle_timeout_ms))],
              supervisions=launched.supervisions)
    faults.crash_point("go:after-agent")
    return True


def _queued_tasks(s: Session, run_id: str, generation: int | None = None) -> frozenset[str]:
    """The tasks whose candidate waits in the run's merge queue (queued, not yet verified or dropped); of that
    generation only, when given."""
    from .integration import load_integration

    integration = load_integration(s.ledger, run_id)
    if integration is None or not integration.rolling or integration.ended:
        return frozenset()
    return frozenset(step.task_id for step in integration.steps
                     if step.status not in ("verified", "conflicted", "rejected")
                     and generation in (None, step.generation))


def _repair_base(s: Session, task: task_aggregate.Task) -> str | None:
    """The integrated head a repair starts from: when the task's last feedback says its step was dropped from the
    merge queue, the head that step did not go onto."""
    from .integration import load_integration

    last = task.feedback[-1] if task.feedback else None
    if last is None or last.code not in (Code.INTEGRATION_CONFLICT, Code.INTEGRATION_REJECTED):
        return None
    integration = load_integration(s.ledger, task.run_id)
    if integration is None:
        return None
    dropped = [step for step in integration.steps if step.task_id == task.task_id
               and step.binding_id == last.binding_id and step.base is not None]
    return dropped[-1].base if dropped else None


def _start_commit(s: Session, settings: GoSettings, run: run_aggregate.Run,
                  task: task_aggregate.Task) -> str | bool | None:
    """Where a new worktree of the task starts: None for the run's base; for a task that depends on others, the
    merge of their passed candidates onto the base, in task order (False: they conflict, and the task failed)."""
    from ..world.merge import merge_candidate

    assert run.plan is not None and run.base_commit is not None
    depends_on = run.plan.depends_on(task.task_id)
    if not depends_on:
        return None
    head = run.base_commit
    for dependency in depends_on:
        binding = load_task(s.ledger, dependency).finished_binding
        candidate = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding or ""))
        if candidate is None or candidate.commit is None:
            _finish(s, task.task_id, "failed", None, "dependency-missing", f"{dependency} has no candidate")
            return False
        merged = merge_candidate(settings.repository, head, candidate.commit,
                                 f"docket: start {task.task_id} from {dependency}\n\nDocket-Run: {run.run_id}\n")
        if merged.state in ("merged", "already-merged") and merged.commit:
            head = merged.commit
            continue
        _finish(s, task.task_id, "failed", None, "dependency-conflict",
                f"the work of {', '.join(depends_on)} does not merge ({merged.state}): "
                f"{', '.join(merged.conflicts[:10]) or merged.detail}")
        return False
    return head


def _judge(s: Session, settings: GoSettings, run: run_aggregate.Run, task: task_aggregate.Task,
           worker: worker_aggregate.Worker) -> None:
    """Judge a generation that ended: pass the task (its candidate checked and handed off) or record feedback."""
    generation = worker.generation
    if worker.status == "launch-failed":
        _feedback(s, task, generation, "launch-failed", None, None, _worker_tail(s, worker) or "it could not start")
        return
    if worker.exit_cause in ("timeout", "idle-timeout"):
        what = "ran out of time" if worker.exit_cause == "timeout" else "printed nothing for too long"
        _feedback(s, task, generation, f"agent-{worker.exit_cause}", None, None,
                  f"the agent {what} and was stopped\n{_worker_tail(s, worker)}")
        return
    if worker.exit_cause == "stopped" or worker.exit_code != 0:
        how = "was stopped on request" if worker.exit_cause == "stopped" else f"exited {worker.exit_code}"
        _feedback(s, task, generation, "agent-failed", None, None, f"the agent {how}\n{_worker_tail(s, worker)}")
        return
    candidate = _pin(s, settings, run, task, generation)
    if candidate is None:
        return
    faults.crash_point("go:after-pin")
    for spec in settings.required:
        result, feedback = _check(s, settings, run.run_id, candidate.binding_id, spec)
        if result != "passed":
            _feedback(s, task, generation, "check-failed", spec.name, candidate.binding_id, feedback, composed=True)
            return
    faults.crash_point("go:before-handoff")
    _hand_off(s, settings, task, candidate)


def _pin(s: Session, settings: GoSettings, run: run_aggregate.Run, task: task_aggregate.Task,
         generation: int) -> candidate_aggregate.Candidate | None:
    from .candidates import pin_task

    try:
        pinned = pin_task(s.ledger, s.clock, s.effector, run.run_id, task.task_id, artifact_dir=settings.artifact_dir,
                          worker_id=task_worker_id(task.task_id), generation=generation)
    except RunClosed:
        return None
    except DocketError as e:
        _feedback(s, task, generation, "pin-failed", None, None, f"{e.code}: {e.message}")
        return None
    if pinned.result == "unchanged":
        _feedback(s, task, generation, "no-changes", None, None, "the agent changed nothing in its worktree")
        return None
    if pinned.result == "unstable":
        _feedback(s, task, generation, "unstable", None, None,
                  "files kept changing after the agent exited: " + ", ".join(pinned.differing[:20]))
        return None
    candidate = pinned.candidate
    if candidate is None or candidate.status != "pinned":
        status = candidate.status if candidate else "missing"
        if status in ("pinning",):
            return None  # its outcome is unknown for now: judged again on the next pass
        _feedback(s, task, generation, "pin-failed", None, None, f"the candidate is {status}")
        return None
    return candidate


def _check(s: Session, settings: GoSettings, run_id: str, binding: str, spec: CheckSpec) -> tuple[str, str]:
    """The required check's result on the candidate (one recorded under this configuration, or a new run), and the
    feedback for the agent when it did not pass, with a note when the check fails on the run's base too (the base
    is checked once a candidate fails, or before, when it is judged relative to the base)."""
    from ...domain.processes import bounded_tail
    from ...domain.task import check_feedback
    from .base_checks import check_base
    from .checks import run_check
    from .integration import _concluded
    from .workers import log_summary

    candidate = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding))
    assert candidate is not None
    done = _concluded(candidate, spec.name, spec.config_sha256)  # recorded before a crash: never run twice
    if done is None:
        outcome = run_check(s.ledger, s.clock, s.effector, binding, spec, artifact_dir=settings.artifact_dir,
                            docket_dir=settings.docket_dir, ledger_path=settings.ledger_path)
        candidate = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding))
        assert candidate is not None
        done = candidate.check_run(outcome.check_id)
    if done.result == "passed":
        return "passed", ""
    try:
        base = check_base(s.ledger, s.clock, s.effector, run_id, spec, repository=settings.repository,
                          artifact_dir=settings.artifact_dir, docket_dir=settings.docket_dir,
                          ledger_path=settings.ledger_path)
    except DocketError:
        base = None  # the note is left out; the candidate's own result stands
    tail = next((getattr(e, "tail", "") for _, e in reversed(s.ledger.history(candidate_aggregate.stream_of(binding)))
                 if getattr(e, "check_id", None) == done.check_id and getattr(e, "tail", None) is not None), "")
    if done.log_path and _tests_unusable(done):  # the end of its output, more of it than the event keeps
        tail = bounded_tail(log_summary(Path(done.log_path)).end, max_lines=60, max_chars=3500) or tail
    return done.result or "failed", check_feedback(spec.name, done.result or "failed", done.result_code, done.tests,
                                                   tail, message=done.result_message,
                                                   base_result=base.result if base else None,
                                                   base_code=base.code if base else None)


def _tests_unusable(run: candidate_aggregate.CheckRun) -> bool:
    return run.tests is None or run.tests.problem is not None or not run.tests.failing


def _hand_off(s: Session, settings: GoSettings, task: task_aggregate.Task,
              candidate: candidate_aggregate.Candidate) -> None:
    from .handoff import confirm_handoff, offer_handoff

    current = s.ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(candidate.binding_id))
    assert current is not None
    if current.handoff is None:
        current = offer_handoff(s.ledger, s.clock, candidate.binding_id)
    if current.handoff in ("offered",):
        required = {spec.name: spec.config_sha256 for spec in settings.required}
        current = confirm_handoff(s.ledger, s.clock, s.effector, candidate.binding_id, required)
    if current.handoff == "confirmed" and not settings.approval:
        _queue(s, settings, task, current)
    elif current.handoff == "confirmed":
        _finish(s, task.task_id, "passed", candidate.binding_id, None, None)
    else:
        _feedback(s, task, candidate.generation or 0, "handoff-rejected", None, candidate.binding_id,
                  f"the handoff of candidate {candidate.binding_id[:12]} was {current.handoff}")


def _queue(s: Session, settings: GoSettings, task: task_aggregate.Task,
           candidate: candidate_aggregate.Candidate) -> None:
    """Queue the passed candidate for integration now; the integrator finishes the task once its step is
    verified. A queue fixed already (by 'docket integrate'), or stopped, takes no step: the task has passed."""
    from .integration import queue_task

    run = load_run(s.ledger, task.run_id)
    assert run.plan is not None
    try:
        queue_task(s.ledger, s.clock, s.effector, task.run_id, task.task_id, candidate.binding_id, checks=settings.checks,
                   depends_on=run.plan.depends_on(task.task_id))
    except RunClosed:
        pass
    except DependenciesUnsettled:
        time.sleep(TICK_SECONDS)  # judged again on the next pass (its checks are not run twice)
    except Refused as e:
        if e.code not in (Code.QUEUE_FIXED, Code.QUEUE_STOPPED):
            raise
        _finish(s, task.task_id, "passed", candidate.binding_id, None, None)


def _feedback(s: Session, task: task_aggregate.Task, generation: int, code: str, check: str | None,
              binding: str | None, text: str, *, composed: bool = False) -> None:
    """Record why the generation failed; text is cut to its end (composed: bounded and escaped already)."""
    from ...domain.processes import bounded_tail

    feedback = (text if composed else bounded_tail(text.encode("utf-8", "replace"), max_lines=40,
                                                   max_chars=3000)) or code

    def decision(now: str) -> list[Any]:
        return task_aggregate.record_feedback(load_task(s.ledger, task.task_id), load_run(s.ledger, task.run_id),
                                              generation=generation, code=code, check=check, binding_id=binding,
                                              feedback=feedback, now=now)

    faults.crash_point("go:before-feedback")
    try:
        s.ledger.decide(decision, s.clock.now())
    except RunClosed:
        pass
    except Refused as e:
        if e.code != Code.TASK_FINISHED:
            raise


def _finish(s: Session, task_id: str, result: str, binding: str | None, code: str | None,
            message: str | None) -> None:
    def decision(now: str) -> list[Any]:
        task = load_task(s.ledger, task_id)
        return task_aggregate.finish(task, load_run(s.ledger, task.run_id), result=result, binding_id=binding,
                                     code=code, message=message, now=now)

    try:
        s.ledger.decide(decision, s.clock.now())
    except RunClosed:
        pass


def _worker_tail(s: Session, worker: worker_aggregate.Worker) -> str:
    """The tail of the generation's log as WorkerExited recorded it."""
    for _, event in reversed(s.ledger.history(worker_aggregate.stream_of(worker.worker_id))):
        if getattr(event, "generation", None) == worker.generation and hasattr(event, "tail"):
            return event.tail or ""
    return ""


def task_ids(run: run_aggregate.Run) -> Sequence[str]:
    return run.plan.task_ids if run.plan is not None else ()
