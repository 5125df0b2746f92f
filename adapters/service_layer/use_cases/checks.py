"""Use case: run one attempt of a check against a pinned candidate, in its own execution, through the launch gate.

The path of one check run, each step recorded before the next is taken:

1. CheckRequested (the attempt, bound to the configuration's digest) and the
   execution intent: a detached worktree at the candidate's commit;
2. the launch intent: the command started held at a gate, its identity
   recorded (CheckLaunched), only then the gate opened;
3. the command watched until it ends, its timeout or idle timeout stopping its
   whole process group; the execution inspected (a mutated one fails the check)
   and the artifact directory copied back to the task's worktree;
4. one result: CheckPassed, CheckFailed or CheckTimedOut, with the output's
   digest and a bounded tail;
5. the execution's removal intent (refused while the group lives).

If this process dies part way, ``settle_checks`` (abandoned_checks.py; run by ``docket replay
--apply`` and ``docket reconcile --apply``) records the run as interrupted once
nothing of it can be running, and removes its execution. If the supervisor
driving the run is interrupted (Ctrl-C, SIGTERM: ``stopping_checks``), the
check's group is stopped at once (TERM, then KILL after a grace), the run is
recorded as interrupted (CheckFailed ``interrupted``, which says nothing of the
candidate: the check runs again on resume), its execution removed, and
``CheckInterrupted`` raised; no new check of that run starts meanwhile. How a
check is judged (by its exit, or relative to the run's base) is chosen in
``base_checks``.

While ``docket go`` drives a run, its checks share a pool of slots
(``checks_pool``: ``--checks``, ``[run] checks``, the machine's cores by default):
a check's process is launched only once it holds one, and gives it back when the
process has ended; the others wait (stopped at once all the same when the
supervisor is interrupted). Outside a pool (``docket check run``) nothing waits.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain import candidate as candidate_aggregate
from ....domain import check as candidate_check
from ....domain import execution as candidate_execution
from ....domain.kernel.canonical import canonical_json
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import DocketError, OutcomeUnknown, Refused, WorkStopped
from ....domain.events import Event
from ....domain.containment.processes import scrub_environment
from ....domain.containment.sandbox import Confinement
from ...world import faults
from ...world.clock import Clock, new_id
from ...world.files.logs import known_secrets, log_summary
from .candidates import load_candidate
from ..kernel.ledger import Ledger
from .runs import load_run
from .worker_preparation import last_message

if TYPE_CHECKING:
    from ....domain.candidate import CheckResult
    from ..kernel.ports import EffectorPort, GatedHandle, ProcessPort

__all__ = [
    "Baseline", "CheckCancelled", "CheckInterrupted", "CheckOutcome", "CheckSlot", "CheckSpec", "cancel_checks",
    "check_slot", "checks_pool", "pinned_candidate", "remove_execution", "run_attempt", "stopping_checks",
    "take_check_slot",
]

POLL_SECONDS = 0.05
STOP_GRACE_SECONDS = 5.0
INTERRUPTED_MESSAGE = ("stopped: the docket supervising the run was interrupted (Ctrl-C or SIGTERM); this says "
                       "nothing of the candidate, and the check runs again when the run goes on")


class CheckInterrupted(WorkStopped):
    """The check was not run to its end: the docket supervising its run was interrupted (``stopping_checks``). A
    run of it that had started is recorded as interrupted; nothing is judged by it."""

    def __init__(self, message: str):
        super().__init__(Code.INTERRUPTED, message)


_stops: dict[str, threading.Event] = {}  # run id -> set once its supervisor is interrupted: its checks stop
_stops_lock = threading.Lock()


@contextmanager
def stopping_checks(run_id: str, interrupted: threading.Event) -> Iterator[None]:
    """While inside: once ``interrupted`` is set, every check this process runs for the run (a task's, the base's,
    the merge queue's) stops, and no new one starts (CheckInterrupted)."""
    with _stops_lock:
        previous = _stops.get(run_id)
        _stops[run_id] = interrupted
    try:
        yield
    finally:
        with _stops_lock:
            if previous is None:
                _stops.pop(run_id, None)
            else:
                _stops[run_id] = previous


def _stopped(run_id: str) -> bool:
    with _stops_lock:
        event = _stops.get(run_id)
    return event is not None and event.is_set()


class CheckCancelled(WorkStopped):
    """The check was not run to its end: the merge queue gave up on the verification it served (a speculation
    built on a step that was then dropped: ``cancel_checks``). A run of it that had started is recorded failed,
    speculation-cancelled, which says nothing of the candidate."""

    def __init__(self, message: str):
        super().__init__(Code.SPECULATION_CANCELLED, message)


_cancelled: dict[str, str] = {}  # candidate binding id -> why its checks stop (cancel_checks)


def cancel_checks(binding: str, why: str) -> None:
    """Stop the checks this process runs on the candidate, and start none on it any more (CheckCancelled)."""
    with _stops_lock:
        if len(_cancelled) > 10_000:
            _cancelled.clear()
        _cancelled[binding] = why


def _cancelled_because(binding: str) -> str | None:
    with _stops_lock:
        return _cancelled.get(binding)


class _Pool:
    """A run's check slots, handed out in order of priority, then of asking (a semaphore is neither fair nor
    ordered: a check that asked first could wait behind ones that asked later)."""

    def __init__(self, slots: int):
        self.free = slots
        self.waiting: list[tuple[tuple[int, int], int]] = []  # a heap of (priority, ticket)
        self.tickets = 0
        self.changed = threading.Condition()

    def take(self, priority: tuple[int, int], stop: Callable[[], WorkStopped | None]) -> None:
        """Wait for a slot, taken in turn; raises what stop() returns (checked after each wait)."""
        with self.changed:
            self.tickets += 1
            mine = (priority, self.tickets)
            heapq.heappush(self.waiting, mine)
            try:
                while True:
                    if self.free > 0 and self.waiting[0] == mine:
                        heapq.heappop(self.waiting)
                        self.free -= 1
                        if self.waiting and self.free > 0:
                            self.changed.notify_all()  # the next in turn may take another
                        return
                    stopped = stop()
                    if stopped is not None:
                        raise stopped
                    self.changed.wait(POLL_SECONDS)
            except BaseException:
                if mine in self.waiting:
                    self.waiting.remove(mine)
                    heapq.heapify(self.waiting)
                    self.changed.notify_all()
                raise

    def release(self) -> None:
        with self.changed:
            self.free += 1
            self.changed.notify_all()


_pools: dict[str, _Pool] = {}  # run id -> the slots its checks share while go drives it


@contextmanager
def checks_pool(run_id: str, slots: int) -> Iterator[None]:
    """While inside: at most ``slots`` of the run's checks that this process runs (a task's, the base's, the merge
    queue's) have a process at once; each other one waits for a slot (``take_check_slot``) before it is launched.
    Outside any pool a check waits for nothing (``docket check run``)."""
    if slots < 1:
        raise ValueError(f"a pool of checks has at least one slot, not {slots}")
    with _stops_lock:
        previous = _pools.get(run_id)
        _pools[run_id] = _Pool(slots)
    try:
        yield
    finally:
        with _stops_lock:
            if previous is None:
                _pools.pop(run_id, None)
            else:
                _pools[run_id] = previous


class CheckSlot:
    """One slot of a run's pool of checks, held until released (once: releasing again does nothing). Outside a
    pool it holds nothing."""

    def __init__(self, pool: _Pool | None):
        self._pool = pool

    def release(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.release()


QUEUE_FIRST = 0  # the merge queue's checks, the head of the queue first: a step lands only once they pass
BASE = 1  # the base's: every check judged relative to it waits for it
CANDIDATE = 2  # a task's own


def slot_priority(boundary: str) -> tuple[int, int]:
    """Who gets a free slot first: the merge queue's verifications (boundary integration-<step>, the lowest step
    first: what waits for its verdict lands first), then the base's checks, then the tasks'."""
    if boundary.startswith("integration-") and boundary[len("integration-"):].isdigit():
        return (QUEUE_FIRST, int(boundary[len("integration-"):]))
    if boundary in ("base", "base-tests"):
        return (BASE, 0)
    return (CANDIDATE, 0)


def take_check_slot(run_id: str, binding: str | None = None, priority: tuple[int, int] = (CANDIDATE, 0)
                    ) -> CheckSlot:
    """A slot of the run's pool of checks (``checks_pool``), waited for in turn (``slot_priority``, then the order
    of asking) while every one is taken; at once outside a pool. While it waits, or before: CheckInterrupted,
    promptly, once the docket supervising the run is interrupted (``stopping_checks``); CheckCancelled once the
    checks of ``binding`` are (``cancel_checks``)."""
    with _stops_lock:
        pool = _pools.get(run_id)
    if pool is None:
        return CheckSlot(None)

    def stop() -> WorkStopped | None:
        if _stopped(run_id):
            return CheckInterrupted(f"a check of run {run_id} waited for a slot and was not started: the docket "
                                    "supervising the run was interrupted")
        if binding is not None and (why := _cancelled_because(binding)) is not None:
            return CheckCancelled(f"a check of candidate {binding} waited for a slot and was not started: {why}")
        return None

    stopped = stop()
    if stopped is not None:
        raise stopped
    pool.take(priority, stop)
    stopped = stop()  # a slot taken too: what a stopped check gives back starts nothing
    if stopped is not None:
        pool.release()
        raise stopped
    return CheckSlot(pool)


@contextmanager
def check_slot(run_id: str) -> Iterator[CheckSlot]:
    """A slot of the run's pool of checks held while inside (``take_check_slot``), released however it is left."""
    slot = take_check_slot(run_id)
    try:
        yield slot
    finally:
        slot.release()


@dataclass(frozen=True)
class CheckSpec:
    """One configured check, as a run needs it (from docket.toml's [checks.NAME])."""

    name: str
    argv: Any  # (execution path) -> the exact argv
    config_sha256: str
    required: bool
    timeout_ms: int
    idle_timeout_ms: int | None = None
    environment: Any = None  # (execution path) -> extra variables; None: none
    env_allow: Sequence[str] = ()
    junit: str | None = None  # its JUnit XML report, relative to the execution's root
    judge: str = "exit"  # exit | relative-to-base
    confinement: Confinement = Confinement(network="none")  # its sandbox (sandboxes.py)
    protected: tuple[str, ...] = ()  # globs a candidate cannot weaken (domain/containment/protected.py, base_tests.py); (): none

    @classmethod
    def of(cls, name: str, check: Any, *, sandbox: str = "landlock") -> CheckSpec:
        """The spec of docket.toml's [checks.NAME] (a domain.config.CheckConfig); sandbox: docket.toml's."""
        from ....domain.config import check_config_sha256

        confinement = Confinement(mode=sandbox, read=tuple(check.read), write=tuple(check.write),  # type: ignore
                                  network=check.network)
        return cls(name=name, argv=check.argv, config_sha256=check_config_sha256(name, check),
                   required=check.required, timeout_ms=check.timeout_ms, idle_timeout_ms=check.idle_timeout_ms,
                   environment=check.environment, env_allow=check.env_allow, junit=check.junit, judge=check.judge,
                   confinement=confinement, protected=tuple(check.protected))


@dataclass(frozen=True)
class Baseline:
    """What a relative judgment compares with: the run's base's check of the same configuration (its candidate and
    check run) and the tests failing there (None: its report could not be used, so nothing is explained by it)."""

    binding_id: str
    check_id: str
    failing: frozenset[str] | None


@dataclass(frozen=True)
class CheckOutcome:
    check_id: str
    check: str
    attempt: int
    result: str  # passed | failed | timed-out
    code: str | None
    exit_code: int | None
    signal: int | None
    execution: str
    execution_state: str
    output_sha256: str | None
    tail: str
    artifacts: tuple[dict[str, Any], ...]
    log_path: str | None


def pinned_candidate(ledger: Ledger, binding: str) -> candidate_aggregate.Candidate:
    """The candidate checks run on; Refused ``candidate-not-pinned`` unless it is pinned."""
    candidate = load_candidate(ledger, binding)
    if candidate.status != "pinned" or candidate.commit is None:
        raise Refused(Code.CANDIDATE_NOT_PINNED, f"candidate {binding} is {candidate.status}; checks run only on a "
                                              "pinned candidate")
    return candidate


def run_attempt(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, spec: CheckSpec, *,
                baseline: Baseline | None, artifact_dir: str | None, docket_dir: Path,
                ledger_path: Path) -> CheckOutcome:
    """Run one attempt of the check against the candidate and record its result; its execution removed after.

    With spec.junit its report is read and recorded (CheckTestsReported) before the result. Given the baseline of
    a check judged relative to the base (``base_checks.run_check`` finds it), a command that failed only tests
    failing there too passes; without one, the check is judged by its exit."""
    from ...world.workspaces.executions import execution_path
    from ...world.processes.host import host_id
    from ...world.files.paths import root_of_workspace

    candidate = pinned_candidate(ledger, binding)
    if _stopped(candidate.run_id):
        raise CheckInterrupted(f"check {spec.name} was not started: the docket supervising run {candidate.run_id} "
                               "was interrupted")
    if _cancelled_because(binding) is not None:
        raise CheckCancelled(f"check {spec.name} was not started: {_cancelled_because(binding)}")
    repository = effector.local(candidate.repository)  # this host's clone: a check runs where it is driven
    # beside the task's workspace ([workspace] root), else the default; a workspace another host made is not here
    root = root_of_workspace(candidate.worktree) if repository == Path(candidate.repository) else None
    check_id, execution_intent = new_id("check"), new_id("execution")
    chosen: dict[str, Any] = {}
    from ...world.workspaces.data_owners import record_owner
    from ...world.files.files import own_data_folder
    from ...world.files.paths import executions_root

    # a symlink planted at <root>/executions/<key> is refused (unsafe-path) before the check is requested; below it
    # (folders made and removed under the worktrees lock) the execution's own observation refuses one
    own_data_folder(executions_root(repository, root), root)
    record_owner(executions_root(repository, root), repository)  # whose it is, for gc once the repository is gone

    def decision(now: str) -> list[Event]:
        current = load_candidate(ledger, binding)
        path = str(execution_path(repository, current.run_id, binding, spec.name, current.attempts(spec.name) + 1,
                                  root))
        argv = tuple(spec.argv(path))
        chosen.update(path=path, argv=argv)
        return candidate_check.request_check(
            current, load_run(ledger, current.run_id), check_id=check_id, execution_intent=execution_intent,
            check=spec.name, config_sha256=spec.config_sha256,
            argv_sha256=hashlib.sha256(canonical_json(list(argv))).hexdigest(), required=spec.required,
            timeout_ms=spec.timeout_ms, idle_timeout_ms=spec.idle_timeout_ms, execution_for=lambda _: path,
            artifact_dir=artifact_dir, now=now, repository=str(repository), host=host_id())

    ledger.decide(decision, clock.now())
    faults.crash_point("check:after-request")
    effector.run_pending(only={execution_intent}, after=0)
    run = load_candidate(ledger, binding).check_run(check_id)
    if run.execution_intent is not None:
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the execution of check {check_id} is not known to be made yet; "
                                                "'docket replay --apply' observes again")
    if run.execution_state == "failed":
        return _finish(ledger, clock, effector, binding, check_id, "failed", code="execution-diverged",
                       message=last_message(ledger, candidate_aggregate.stream_of(binding),
                                            "the execution could not be made"), remove=False)
    outcome = _launch_and_wait(ledger, clock, effector, binding, check_id, spec, chosen["argv"],
                               docket_dir=docket_dir, ledger_path=ledger_path, baseline=baseline)
    return outcome


def _launch_and_wait(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, check_id: str, spec: CheckSpec,
                     argv: tuple[str, ...], *, docket_dir: Path, ledger_path: Path,
                     baseline: Baseline | None) -> CheckOutcome:
    from ...world.processes.lifecycle import LaunchSpec
    from ...world.processes.host import host_id
    from ..kernel.launcher import HOST_MARK, LAUNCH_MARK

    candidate = load_candidate(ledger, binding)
    run = candidate.check_run(check_id)
    launcher = effector.ports.launcher
    log_path = docket_dir / "checks" / binding / f"{spec.name}-{run.attempt}.{check_id}.log"
    from ...world.files.files import own_folder

    own_folder(docket_dir, log_path.parent)
    intent_id = new_id("checklaunch")
    env, _ = scrub_environment(os.environ, spec.env_allow)
    env = {k: v for k, v in env.items() if not k.startswith("DOCKET_")}
    env.update(spec.environment(run.execution) if spec.environment else {})
    env.update(DOCKET_RUN=candidate.run_id, DOCKET_TASK=candidate.task_id, DOCKET_CANDIDATE=binding,
               DOCKET_CHECK=spec.name, DOCKET_COMMIT=candidate.commit or "", DOCKET_LEDGER=str(ledger_path),
               DOCKET_EXECUTION=run.execution)
    env[LAUNCH_MARK] = intent_id
    env[HOST_MARK] = host_id()
    env = _guarded(env, Path(run.repository), docket_dir, run.execution)
    from ...world.workspaces.import_guard import guard_folder
    from ...world.processes.sandbox_roots import sandbox_for
    from ...world.workspaces.port import agent_roots

    execution = Path(run.execution)
    sandbox = sandbox_for(spec.confinement, write=[execution],
                          read=[*agent_roots(Path(run.repository), execution)[1], guard_folder(docket_dir)],
                          temporary=log_path.with_name(f"{log_path.stem}.tmp"), argv=argv, env=env, cwd=execution)

    def decision(now: str) -> Event:
        return candidate_check.request_check_launch(load_candidate(ledger, binding), check_id,
                                                    intent_id=intent_id, log_path=str(log_path), now=now,
                                                    sandbox=sandbox.record())

    try:  # while go drives the run: a slot of its pool (checks_pool), held until the process has ended
        slot = take_check_slot(candidate.run_id, binding, slot_priority(candidate.boundary))
    except CheckInterrupted:  # while it waited: never started, and recorded as interrupted all the same
        _finish(ledger, clock, effector, binding, check_id, "failed", code=Code.INTERRUPTED,
                message=f"check {spec.name}: {INTERRUPTED_MESSAGE}")
        raise
    except CheckCancelled as e:
        _finish(ledger, clock, effector, binding, check_id, "failed", code=Code.SPECULATION_CANCELLED,
                message=e.message[:4000])
        raise
    try:
        ledger.decide(decision, clock.now())
        launcher.expect(intent_id, LaunchSpec(argv=argv, cwd=execution, env=env, log_path=log_path,
                                              sandbox=sandbox))
        try:
            effector.run_pending(only={intent_id}, after=0)
            run = load_candidate(ledger, binding).check_run(check_id)
            if run.launch_failure is not None:
                slot.release()
                return _finish(ledger, clock, effector, binding, check_id, "failed", code="launch-failed",
                               message=last_message(ledger, candidate_aggregate.stream_of(binding),
                                                    "the check could not be started"))
            if run.process is None:
                raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the launch of check {check_id} is not known to have "
                                                        "happened yet; 'docket replay --apply' observes again")
            faults.crash_point("check:before-gate")
            gated = launcher.release(intent_id, run.process)
        finally:
            launcher.close()
        if gated is None:
            raise Refused(Code.LAUNCHED_ELSEWHERE, f"check {check_id} was launched by another docket process")
        started = time.monotonic()
        code, cause = _wait(effector.ports.processes, gated, log_path, spec,
                            stop=lambda: _stopped(candidate.run_id) or _cancelled_because(binding) is not None)
        duration_ms = int((time.monotonic() - started) * 1000)
    finally:
        slot.release()  # its process has ended, or never started: judging it takes no slot
    faults.crash_point("check:after-exit")
    why = _cancelled_because(binding)
    if cause == "interrupted" and why is not None and not _stopped(candidate.run_id):
        _finish(ledger, clock, effector, binding, check_id, "failed", code=Code.SPECULATION_CANCELLED,
                message=f"check {spec.name} was stopped: {why}"[:4000], signal=-code if code < 0 else None,
                exit_code=code if code >= 0 else None, duration_ms=duration_ms, log_path=log_path)
        raise CheckCancelled(f"check {spec.name} was stopped: {why}")
    if cause == "interrupted":  # its group is gone: recorded as such, judged by nobody, run again on resume
        _finish(ledger, clock, effector, binding, check_id, "failed", code=Code.INTERRUPTED,
                message=f"check {spec.name}: {INTERRUPTED_MESSAGE}", signal=-code if code < 0 else None,
                exit_code=code if code >= 0 else None, duration_ms=duration_ms, log_path=log_path)
        raise CheckInterrupted(f"check {spec.name} was stopped: the docket supervising run {candidate.run_id} was "
                               "interrupted")
    return _conclude(ledger, clock, effector, binding, check_id, code, cause, duration_ms, log_path, spec, baseline)


def _guarded(env: dict[str, str], repository: Path, docket_dir: Path, execution: str) -> dict[str, str]:
    """env with the import guard (world/import_guard.py): a Python check cannot import the user's checkout."""
    from ...world.workspaces.import_guard import guard_environment, guard_folder
    from ...world.files.paths import main_worktree

    checkout = main_worktree(repository)
    if checkout is None:
        return env
    return guard_environment(env, folder=guard_folder(docket_dir), checkout=checkout, execution=execution)


def _wait(processes: ProcessPort, gated: GatedHandle, log_path: Path, spec: CheckSpec, *,
          stop: Any = None) -> tuple[int, str | None]:
    """Wait for the check's process; stop its group at the timeout or idle timeout, or once stop() says its
    supervisor was interrupted. (returncode, "timeout" | "idle-timeout" | "interrupted" | None)."""
    from ...world.processes.lifecycle import wait_for_group

    return wait_for_group(processes, gated, timeout_ms=spec.timeout_ms, idle_timeout_ms=spec.idle_timeout_ms,
                          log_path=log_path, grace=STOP_GRACE_SECONDS, poll=POLL_SECONDS, stop=stop)


def _conclude(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, check_id: str, code: int,
              cause: str | None, duration_ms: int, log_path: Path, spec: CheckSpec,
              baseline: Baseline | None) -> CheckOutcome:
    """Inspect the execution, copy its artifacts back, read its report, and record the one result."""
    candidate = load_candidate(ledger, binding)
    commit = candidate.commit
    assert commit is not None  # a check runs on a pinned candidate
    run = candidate.check_run(check_id)
    inspection = effector.ports.workspaces.inspect_execution(Path(run.repository), Path(run.execution), commit)
    artifacts: list[dict[str, Any]] = []
    artifact_error: DocketError | None = None
    if inspection.state == "matching" and run.artifact_dir:
        from ...world.workspaces.artifacts import copy_artifacts

        try:
            tracked = effector.ports.capture.tree_paths(Path(run.repository), commit,
                                                        run.artifact_dir)  # not check output
            copied = copy_artifacts(Path(run.execution), run.artifact_dir, Path(candidate.worktree), tracked=tracked)
            artifacts = [dict(path=a.path, sha256=a.sha256, size=a.size) for a in copied]
        except DocketError as e:
            artifact_error = e
    signal = -code if code < 0 else None
    exit_code = code if code >= 0 else None
    judgment = None
    if spec.junit and cause is None and inspection.state == "matching":
        judgment = _record_report(ledger, clock, binding, check_id, spec, Path(run.execution), code, baseline)
    faults.crash_point("check:before-result")
    if cause is not None:
        return _finish(ledger, clock, effector, binding, check_id, "timed-out", cause=cause, exit_code=exit_code,
                       signal=signal, duration_ms=duration_ms, log_path=log_path, execution=inspection.state,
                       artifacts=artifacts)
    if inspection.state != "matching":
        return _finish(ledger, clock, effector, binding, check_id, "failed", code=f"execution-{inspection.state}",
                       message=f"the check changed its execution: {inspection.detail}"[:4000], exit_code=exit_code,
                       signal=signal, duration_ms=duration_ms, log_path=log_path, execution=inspection.state)
    from ...world.workspaces.import_guard import violations

    refused = violations(log_path)
    if refused:
        return _finish(ledger, clock, effector, binding, check_id, "failed", code="import-outside-execution",
                       message=("the check imported from the user's checkout, not its execution: "
                                + "; ".join(refused))[:4000], exit_code=exit_code, signal=signal,
                       duration_ms=duration_ms, log_path=log_path, execution=inspection.state)
    if artifact_error is not None:
        return _finish(ledger, clock, effector, binding, check_id, "failed", code=artifact_error.code,
                       message=artifact_error.message[:4000], exit_code=exit_code, signal=signal,
                       duration_ms=duration_ms, log_path=log_path, execution=inspection.state)
    if code == 0 or (judgment is not None and judgment.passed):
        return _finish(ledger, clock, effector, binding, check_id, "passed", duration_ms=duration_ms,
                       exit_code=exit_code, log_path=log_path, execution=inspection.state, artifacts=artifacts)
    how = f"exited {exit_code}" if exit_code is not None else f"was killed by signal {signal}"
    if judgment is not None and judgment.new:
        how += f"; {len(judgment.new)} test(s) failed that pass on the run's base"
    return _finish(ledger, clock, effector, binding, check_id, "failed", code="exit" if exit_code is not None
                   else "signal", message=f"the check's command {how}", exit_code=exit_code, signal=signal,
                   duration_ms=duration_ms, log_path=log_path, execution=inspection.state, artifacts=artifacts)


def _record_report(ledger: Ledger, clock: Clock, binding: str, check_id: str, spec: CheckSpec, execution: Path,
                   code: int, baseline: Baseline | None) -> Any:
    """Read the check's JUnit report from its execution and record CheckTestsReported; the relative judgment
    (domain.junit.Judgment) when the command failed and the check is judged relative to a baseline that has
    usable failures, else None (judged by its exit)."""
    from ....domain.reports.junit import MAX_REPORT_BYTES, ReportError, judge_relative, parse_junit
    from ...world.workspaces.artifacts import read_report

    junit = spec.junit
    assert junit is not None
    parsed, problem, digest = None, None, None
    try:
        data = read_report(execution, junit, MAX_REPORT_BYTES)
        if data is None:
            problem = ("report-missing", f"the check wrote no report at {spec.junit}")
        else:
            digest = hashlib.sha256(data).hexdigest()
            parsed = parse_junit(data, known_secrets())
    except ReportError as e:
        problem = (e.code, e.message)
    except DocketError as e:
        problem = ("report-unreadable", f"{e.code}: {e.message}")
    except OSError as e:
        problem = ("report-unreadable", f"{spec.junit} cannot be read: {e.strerror or e}")
    judgment = None
    if baseline is not None and code != 0 and parsed is not None and baseline.failing is not None:
        judgment = judge_relative(parsed, baseline.failing)

    def decision(now: str) -> list[Event]:
        return candidate_check.tests_reported(
            load_candidate(ledger, binding), check_id, now, report=junit, report_sha256=digest, parsed=parsed,
            problem=problem, judge="exit" if baseline is None else "relative-to-base",
            base=None if baseline is None else (baseline.binding_id, baseline.check_id), judgment=judgment)

    ledger.decide(decision, clock.now())
    return judgment


def _finish(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, check_id: str, result: CheckResult, *,
            code: str | None = None, message: str | None = None, cause: str | None = None,
            exit_code: int | None = None, signal: int | None = None, duration_ms: int | None = None,
            log_path: Path | None = None, execution: str = "none", artifacts: Sequence[dict[str, Any]] = (),
            remove: bool = True) -> CheckOutcome:
    summary = log_summary(log_path)

    def decision(now: str) -> list[Event]:
        return candidate_check.check_result(
            load_candidate(ledger, binding), check_id, result, now, duration_ms=duration_ms,
            output_sha256=summary.sha256, output_bytes=summary.size, tail=summary.tail, execution=execution,
            artifacts=artifacts, code=code, exit_code=exit_code, signal=signal, message=message, cause=cause)

    ledger.decide(decision, clock.now())
    faults.crash_point("check:after-result")
    if remove:
        remove_execution(ledger, clock, effector, binding, check_id)
    run = load_candidate(ledger, binding).check_run(check_id)
    return CheckOutcome(check_id, run.check, run.attempt, run.result or result, run.result_code, exit_code, signal,
                        run.execution, run.execution_state, summary.sha256, summary.tail, tuple(artifacts),
                        str(log_path) if log_path else None)


def remove_execution(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, check_id: str) -> str:
    """Record and drive the removal of the check run's execution; its state after (removed, or removing)."""
    intent_id = new_id("unexec")

    def decision(now: str) -> list[Event]:
        return candidate_execution.request_removal(load_candidate(ledger, binding), check_id, intent_id=intent_id,
                                                   now=now)

    ledger.decide(decision, clock.now())
    run = load_candidate(ledger, binding).check_run(check_id)
    if run.removal_intent is not None:
        effector.run_pending(only={run.removal_intent}, after=0)
        run = load_candidate(ledger, binding).check_run(check_id)
    return run.execution_state
