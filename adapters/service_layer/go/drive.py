"""`docket go`: one process supervises a planned run to its end, and a second one after a crash finishes it.

Everything it decides is read back from the ledger, so a fresh process (``--resume``,
``docket supervise``) takes up exactly where a killed one stopped:

- The main loop starts a task's work when what it depends on passed, at most
  ``parallel`` agents at once (go/agent_places.py: a task being judged holds no place; checks have their own
  slots, --checks), and watches the run: paused (its agents are stopped and
  relaunched on resume), aborted, or out of budget (RunBudgetExhausted: its time; RunUsageExhausted: the cost or
  tokens its agents reported reached its max_cost or max_tokens).
- A task's work (go_task.py) runs in its own thread with its own ledger connection: launch
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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ....domain import run as run_aggregate
from ....domain import worker as worker_aggregate
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import DocketError, Fenced, Refused, RunClosed, TargetCheckedOut
from ..merge_queue.speculation import Speculation
from .session import RunDriver, Session
from .settings import GoSettings
from .judging import held_for_a_person
from .agent_places import AgentPlace, AgentPlaces
from .task import finish_task, queued_tasks, task_worker_id, work_on
from ..use_cases.leases import driver_resource
from ..use_cases.runs import load_run
from ..use_cases.tasks import load_task
from ...world.clock import lease_ttl_ms

if TYPE_CHECKING:
    from securesystemslib.signer import CryptoSigner

    from .hooks import RunHooks

__all__ = ["drive_run"]

TICK_SECONDS = 0.25
STANDBY_SECONDS = 1.0
DRIVER_TTL_MS = lease_ttl_ms(60_000)  # the run's driver lease; renewed every third of that


# --- the main loop -------------------------------------------------------------------------------------------------


def drive_run(driver: RunDriver, settings: GoSettings, run_id: str, *, interrupted: threading.Event,
              signer: CryptoSigner | None = None, hooks: RunHooks | None = None, parallel: int | None = None,
              tick: Callable[[], object] = lambda: None, standing_by: Callable[[str], None] = lambda _: None) -> None:
    """Supervise the planned run until every task has finished, or the run stops, or ``interrupted`` is set.

    One supervisor drives a run: it holds the run's driver lease. Another one stands by (``standing_by`` is told
    why, once) until that lease is released or its holder is positively gone, then recovers what a crash left of
    the run and takes over. Once every task has finished, it delivers the run (exporting its receipt with
    ``signer``, when given) while the lease is held. ``tick`` is called on each pass (and while standing by),
    then ``hooks`` fire. ``parallel``: agents at once (default: the plan's). The views are caught up at the end.

    Once ``interrupted`` is set (Ctrl-C, SIGTERM), what runs stops at once: the run's checks (their groups; each
    recorded as interrupted, and run again when the run goes on: checks.stopping_checks) and its agents (a stop
    request each, reason supervisor-gone: not judged, relaunched on resume)."""
    from ..use_cases.checks import stopping_checks

    with stopping_checks(run_id, interrupted):
        _drive_run(driver, settings, run_id, interrupted=interrupted, signer=signer, hooks=hooks, parallel=parallel,
                   tick=tick, standing_by=standing_by)


def _drive_run(driver: RunDriver, settings: GoSettings, run_id: str, *, interrupted: threading.Event,
               signer: CryptoSigner | None, hooks: RunHooks | None, parallel: int | None, tick: Callable[[], object],
               standing_by: Callable[[str], None]) -> None:
    from ..use_cases.checks import CheckInterrupted
    from .delivery import deliver
    from .recovery import recover
    from ..use_cases.supervision import begin_supervision, end_supervision

    open_session = driver.open_session

    def on_tick() -> None:
        tick()
        if hooks is not None:
            hooks.fire()

    s = open_session()
    threads: dict[str, threading.Thread] = {}
    errors: list[BaseException] = []
    changed = threading.Event()  # wakes the main loop: a task's thread ended, or the merge queue moved
    queue_changed = threading.Event()  # wakes the integrator: a task's thread ended (its step may be queued)
    finished: dict[str, str] = {}  # task id -> result, once read
    supervisions = begin_supervision(s.ledger, s.clock, s.effector.ports.processes, {run_id})
    token = None
    lost = False
    integrating = threading.Event()
    integrator = None
    speculation = Speculation(open_session, settings.speculate)  # the queue's verifications in flight, shared to the end
    try:
        token = _claim_driver(s, run_id, supervisions.get(run_id), interrupted, on_tick, standing_by)
        if token is None:
            return
        recover(driver, run_id)
        # --parallel's places (the plan's, read after recovery): an agent holds one until it has ended, not while
        # its generation is judged; a place given back wakes the loop, which may start a task
        plan = load_run(s.ledger, run_id).plan
        agents = AgentPlaces(parallel or (plan.parallel if plan is not None else 1), freed=changed.set)
        if not settings.approval:
            integrating.set()
            integrator = threading.Thread(target=_integrate_while_working,
                                          args=(open_session, settings, run_id, integrating, errors, changed,
                                                queue_changed, speculation),
                                          name=f"docket-integrator-{run_id}", daemon=True)
            integrator.start()
        renew_at = time.monotonic() + DRIVER_TTL_MS / 3000
        while not interrupted.is_set():
            changed.clear()  # before the ledger is read: what changes it from now on wakes the wait below
            run = load_run(s.ledger, run_id)
            if run.status not in ("active", "paused") or (run.remaining_ms(s.clock.now()) == 0
                                                          and _out_of_budget(s, run_id)) or _spent(s, run):
                break
            if time.monotonic() >= renew_at:
                renew_at = time.monotonic() + DRIVER_TTL_MS / 3000
                if not _renew_driver(s, run_id, token):
                    lost = True
                    interrupted.set()  # its agents stop, nothing more is recorded for the run from here
                    break
            threads = {task: thread for task, thread in threads.items() if thread.is_alive()}
            if errors and not _renew_driver(s, run_id, token):
                lost = True  # fenced: what a task's thread was refused follows from another driver's decisions
                interrupted.set()
                break
            if errors:
                raise errors[0]
            if run.status == "active" and not _start_work(open_session, settings, s, run, threads, errors, agents,
                                                          interrupted, (changed, queue_changed), finished):
                if not threads and not _awaiting_decisions(s, run_id):
                    break
            on_tick()
            changed.wait(TICK_SECONDS)  # a task's thread ending, or the queue moving, wakes the loop at once
        if not interrupted.is_set():  # every task finished, or the run stopped: its agents stop themselves
            for thread in threads.values():
                thread.join()
            _stop_integrator(integrating, queue_changed, integrator)
            if errors:
                raise errors[0]
        if not interrupted.is_set():  # still the driver: no other supervisor integrates, seals or completes the run
            try:
                deliver(driver, settings, run_id, signer, speculation)
            except CheckInterrupted:
                if not interrupted.is_set():
                    raise  # interrupted meanwhile: its last checks run again on resume
    finally:
        if interrupted.is_set():
            integrating.clear()  # the queue stops at its next step, while the agents are stopped
            _stop_workers(s, threads)
        for thread in threads.values():
            thread.join()
        _stop_integrator(integrating, queue_changed, integrator)
        speculation.close()  # interrupted: its checks stopped with the run's; else they ended with the queue
        if token is not None and not lost:
            _release_driver(s, run_id, token)
        end_supervision(s.ledger, s.clock, supervisions)
        s.close()
        driver.update_views()
    if errors and not lost:
        raise errors[0]
    if lost:
        raise Refused(Code.DRIVER_LOST, f"this supervisor's lease on run {run_id} expired unrenewed and another "
                                     "supervisor took the run over; it drives the run from here")


def _integrate_while_working(open_session: Callable[[], Session], settings: GoSettings, run_id: str,
                             integrating: threading.Event, errors: list[BaseException],
                             changed: threading.Event, queue_changed: threading.Event,
                             speculation: Speculation) -> None:
    """The integrator: while the run's agents work, merge and re-verify each queued step and move the target as
    verified steps accumulate (a target whose checkout is in the way is left for the end). A task's thread ending
    (``queue_changed``) wakes it at once; each pass wakes the main loop (``changed``): a verified step finished its
    task, a dropped one sends its task back to work."""
    from ....domain.kernel.errors import OutcomeUnknown
    from ..use_cases.checks import CheckInterrupted
    from ..merge_queue.integration import advance
    from ..merge_queue.integration_steps import load_integration

    s = open_session()
    move_target = True
    try:
        while integrating.is_set():
            queue_changed.clear()  # before the queue is read: a step queued from now on wakes the wait below
            integration = load_integration(s.ledger, run_id)
            if (integration is not None and integration.rolling
                    and (not integration.ended or integration.moved_unrecorded())  # re-queued onto the move first
                    and load_run(s.ledger, run_id).status == "active"):
                try:
                    advance(s.ledger, s.clock, s.effector, run_id, checks=settings.checks,
                            artifact_dir=settings.artifact_dir, docket_dir=settings.docket_dir,
                            ledger_path=settings.ledger_path, checked_out_target=settings.checked_out_target,
                            move_target=move_target, batch=settings.batch,
                            may_grow=lambda: _queue_may_grow(s, run_id), going_on=integrating.is_set,
                            speculation=speculation)
                except (OutcomeUnknown, RunClosed):
                    pass  # observed again on the next pass
                except CheckInterrupted:
                    pass  # its supervisor was interrupted: the step is verified again on resume
                except TargetCheckedOut:
                    move_target = False  # the end of the run says so, and waits for the user
                except Refused as e:
                    if e.code != Code.TARGET_KEEPS_MOVING:
                        raise
                    # left recorded as found: the end of the run re-queues again, or waits
                changed.set()
            queue_changed.wait(TICK_SECONDS)
    except BaseException as e:  # the main loop re-raises it
        errors.append(e)
    finally:
        changed.set()
        s.close()


def _queue_may_grow(s: Session, run_id: str) -> bool:
    """Whether a step may yet join the merge queue's open batch while the agents work: some task not finished and
    not queued has every task it depends on passed (it works, or may start). Else the batch is checked now: what
    waits for it (a dependent task, the end of the run) would wait for ever."""
    from .task import queued_tasks

    run = load_run(s.ledger, run_id)
    if run.plan is None or run.status != "active":
        return False
    queued = queued_tasks(s, run_id)
    results: dict[str, str | None] = {}
    for task_id, depends_on in run.plan.tasks:  # dependencies come first in the plan
        results[task_id] = load_task(s.ledger, task_id).result
        if task_id in queued or results[task_id] is not None:
            continue
        if all(results.get(d) == "passed" for d in depends_on):
            return True
    return False


def _awaiting_decisions(s: Session, run_id: str) -> bool:
    """Whether a follow-up task an agent proposed waits for a person's decision ([inbox] proposals = "queue"): the
    run is not delivered before it is decided, since accepted it becomes one of the run's tasks."""
    from ..use_cases.requests import undecided_proposals

    return bool(undecided_proposals(s.ledger, run_id))


def _stop_integrator(integrating: threading.Event, queue_changed: threading.Event,
                     integrator: threading.Thread | None) -> None:
    integrating.clear()
    queue_changed.set()  # its wait ends now, not at its next tick
    if integrator is not None:
        integrator.join()


def _claim_driver(s: Session, run_id: str, supervision_id: str | None, interrupted: threading.Event,
                  tick: Callable[[], object], standing_by: Callable[[str], None]) -> int | None:
    """The run's driver lease for this supervisor (its token), once no live supervisor holds it; None when the
    run closed or this process was interrupted while it stood by.

    The lease's holder is a worker with role "supervisor" named by this process's supervision id, so whether the
    holder lives is whether the docket process of that supervision (RunSupervised) lives."""
    from ....domain import lease as lease_aggregate
    from ..kernel.liveness import elsewhere
    from ..use_cases.worker_generations import register_worker

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
                liveness = ("dead" if held_by is None else "elsewhere" if elsewhere(processes, held_by)
                            else processes.liveness(held_by))
            me = s.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(supervision_id))
            assert me is not None  # registered above
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


def _renew_driver(s: Session, run_id: str, token: int) -> bool:
    """Renew the run's driver lease; False once it is lost: it expired unrenewed (the database was out of reach
    longer than its time, say) and another host's supervisor took it over, so this one must stop driving."""
    from ..use_cases.leases import renew_lease

    try:
        renew_lease(s.ledger, s.clock, driver_resource(run_id), token, DRIVER_TTL_MS)
    except Fenced:
        return False  # another supervisor holds the run now: its token fences this one's
    except Refused as e:
        if e.code in (Code.LEASE_EXPIRED, Code.LEASE_NOT_HELD):
            return False
    except DocketError:
        pass  # the ledger out of reach: tried again at the next renewal; nobody else can take it meanwhile
    return True


def _release_driver(s: Session, run_id: str, token: int) -> None:
    from ..use_cases.leases import release_lease

    try:
        release_lease(s.ledger, s.clock, driver_resource(run_id), token)
    except DocketError:
        pass


def _start_work(open_session: Callable[[], Session], settings: GoSettings, s: Session, run: run_aggregate.Run,
                threads: dict[str, threading.Thread], errors: list[BaseException], agents: AgentPlaces,
                interrupted: threading.Event, wakes: tuple[threading.Event, ...], finished: dict[str, str]) -> bool:
    """Start the work each ready task may start; whether any task is still unfinished.

    A task starts with one of ``agents``' places (--parallel's), taken here for it: its agent holds it until it has
    ended, not while the generation is judged, so the next task starts meanwhile. None starts while a started task
    waits for a place to relaunch its agent (that one comes first), nor once as many tasks have a thread as there
    are agents' places and check slots together: more would only wait for a check slot.

    ``finished`` keeps the results already read (a finished task stays finished), so a pass reads only the tasks
    that may start now, and stops reading once every slot is taken."""
    assert run.plan is not None
    most_threads = agents.places + settings.check_slots
    unfinished = False
    queued = queued_tasks(s, run.run_id)
    for task_id, depends_on in run.plan.tasks:
        if task_id in finished:
            continue
        if task_id in threads or task_id in queued:  # a queued task takes no slot: its step is the integrator's
            unfinished = True
            continue
        if held_for_a_person(s, run.run_id, task_id):  # nor does one whose candidate waits for a person's approval
            unfinished = True
            continue
        if len(threads) >= most_threads or agents.waiting:
            return True  # no place for an agent: the rest waits for the next pass
        result = load_task(s.ledger, task_id).result
        if result is not None:
            finished[task_id] = result
            continue
        unfinished = True
        results = [finished.get(dependency) for dependency in depends_on]  # dependencies come first in the plan
        if "failed" in results:
            failed = [d for d, r in zip(depends_on, results) if r == "failed"]
            finish_task(s, task_id, "failed", None, "dependency-failed", f"it depends on {', '.join(failed)}, which failed")
            continue
        if None in results:
            continue
        place = agents.try_take()
        if place is None:
            return True  # every place is taken by an agent: the rest waits for one to end
        thread = threading.Thread(target=_guarded, args=(open_session, settings, run.run_id, task_id, errors,
                                                         interrupted, wakes, agents, place),
                                  name=f"docket-task-{task_id}", daemon=True)
        threads[task_id] = thread
        try:
            thread.start()
        except BaseException:
            place.release()
            raise
    return unfinished


def _out_of_budget(s: Session, run_id: str) -> bool:
    """Record RunBudgetExhausted once the run's budget is spent; whether it is."""
    appended = s.ledger.decide(lambda now: run_aggregate.exhaust_budget(load_run(s.ledger, run_id), now),
                               s.clock.now())
    return bool(appended)


def _spent(s: Session, run: run_aggregate.Run) -> bool:
    """Record RunUsageExhausted once what the run's agents reported reaches its max cost or tokens; whether it was."""
    from ..use_cases.usage import stop_when_spent

    return stop_when_spent(s.ledger, s.clock, run.run_id, run=run)


def _stop_workers(s: Session, threads: Mapping[str, threading.Thread]) -> None:
    """This supervisor is leaving: stop the agents it supervises (not judged: the next one relaunches them)."""
    from ..use_cases.workers import request_stop

    here = s.effector.ports.processes.this_host()[0]
    for task_id in threads:
        worker = s.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(task_worker_id(task_id)))
        if worker is not None and worker.status in ("launching", "running") and (
                worker.process is None or worker.process.host == here):  # never another host's generation
            try:
                request_stop(s.ledger, s.clock, worker.worker_id, "supervisor-gone", generation=worker.generation)
            except DocketError:
                pass


def _guarded(open_session: Callable[[], Session], settings: GoSettings, run_id: str, task_id: str,
             errors: list[BaseException], interrupted: threading.Event, wakes: tuple[threading.Event, ...],
             agents: AgentPlaces, place: AgentPlace) -> None:
    try:
        work_on(open_session, settings, run_id, task_id, interrupted, agents=agents, place=place)
    except BaseException as e:  # the main loop re-raises it: a bug must not pass for a finished task
        errors.append(e)
    finally:
        for wake in wakes:  # the main loop (a slot is free) and the integrator (its step may be queued)
            wake.set()
