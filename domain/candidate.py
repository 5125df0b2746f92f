"""The Candidate aggregate: one pinned capture of a task's worktree, and every check run against it.

Its stream is ``candidate:<binding id>``. The pin is an intent
(CandidatePinRequested) resolved by CandidatePinned (created, or found already
there) or CandidateDiverged (another commit holds the ref; it is left alone).
Release is a compare-and-swap delete through CandidateReleaseRequested.

The stream's state (Candidate, its CheckRuns) and its one fold (``apply``) live
here, beside the pin and the release; the decisions on the rest of the stream
live by concept: ``check`` (a check run and what its result means), ``execution``
(a check run's execution, made and removed), ``handoff`` (offered and
confirmed). Names derived from content (binding ids, refs) are in ``binding``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from . import events as ev
from .aggregate import next_event
from .kernel.errors import Refused
from .reports.junit import TestFailure
from .containment.process_identity import ProcessIdentity as Process
from .run import Run, require_open
from .kernel.streams import candidate_stream as stream_of
from .worker import process_of
from .kernel.codes import Code
from .effects import Act, Unknown
from .events import candidate as limits

if TYPE_CHECKING:
    from .effects import Act, CandidateRefObservation, RemoteRefObservation, TargetHistory, Unknown

__all__ = [
    "Candidate",
    "CheckResult",
    "CheckRun",
    "TestsReported",
    "apply",
    "decide_pin",
    "decide_release",
    "made",
    "preserved_by_target",
    "recordable",
    "request_pin",
    "request_release",
    "require_recordable",
    "stream_of",
]

CandidateStatus = Literal["pinning", "pinned", "diverged", "releasing", "released"]
CheckResult = Literal["passed", "failed", "timed-out"]


@dataclass(frozen=True)
class CheckRun:
    """One attempt of one named check against the candidate."""

    check_id: str
    check: str
    attempt: int
    config_sha256: str
    argv_sha256: str
    required: bool
    timeout_ms: int
    idle_timeout_ms: int | None
    execution: str  # its path
    repository: str
    artifact_dir: str | None
    # requested -> ready | failed; then removing -> removed
    execution_state: Literal["requested", "ready", "failed", "removing", "removed"] = "requested"
    execution_intent: str | None = None
    launch_intent: str | None = None
    launch_failure: str | None = None
    process: Process | None = None
    supervisor: Process | None = None
    host: str | None = None  # the host its execution is made on (None: recorded before hosts were)
    launched_at: str | None = None
    log_path: str | None = None
    removal_intent: str | None = None
    result: CheckResult | None = None
    result_code: str | None = None  # CheckFailed's code, or the timeout's cause
    result_message: str | None = None  # CheckFailed's message: what failed, e.g. the tracked file a check changed
    output_sha256: str | None = None
    tests: TestsReported | None = None  # what its JUnit report said (CheckTestsReported), when it has one


@dataclass(frozen=True)
class TestsReported:
    """A check run's JUnit report as recorded, and the judgment its result rests on."""

    __test__ = False

    failing: tuple[TestFailure, ...]
    problem: str | None  # why the report could not be used
    judge: str  # exit | relative-to-base
    base_check_id: str | None = None
    new_failures: tuple[str, ...] | None = None
    known_failures: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Candidate:
    binding_id: str
    run_id: str
    task_id: str
    version: int
    worker_id: str | None
    generation: int | None
    boundary: str
    repository: str
    worktree: str
    ref: str
    parent: str
    tree: str
    base: str
    changed_paths: tuple[str, ...]
    status: CandidateStatus = "pinning"
    pin_intent: str | None = None
    commit: str | None = None  # once pinned
    diverged_commit: str | None = None
    release_intent: str | None = None
    release_failure: str | None = None
    checks: tuple[CheckRun, ...] = ()
    handoff: Literal["offered", "confirmed", "rejected"] | None = None
    handoff_code: str | None = None  # why the last confirmation was rejected

    def check_run(self, check_id: str) -> CheckRun:
        for run in self.checks:
            if run.check_id == check_id:
                return run
        raise Refused(Code.UNKNOWN_CHECK, f"candidate {self.binding_id} has no check run {check_id}")

    def attempts(self, check: str) -> int:
        return sum(1 for run in self.checks if run.check == check)

    def latest(self, check: str) -> CheckRun | None:
        """The last attempt of the named check, if any."""
        runs = [run for run in self.checks if run.check == check]
        return runs[-1] if runs else None


def apply(candidate: Candidate | None, event: ev.Event, position: int) -> Candidate:
    if isinstance(event, ev.CandidatePinRequested):
        fields: dict[str, Any] = dict(  # Candidate's keyword arguments
            binding_id=event.binding_id, run_id=event.run_id, task_id=event.task_id, version=event.version,
            worker_id=event.worker_id, generation=event.generation, boundary=event.boundary,
            repository=event.repository, worktree=event.worktree, ref=event.ref, parent=event.parent,
            tree=event.tree, base=event.base, changed_paths=tuple(event.changed_paths),
            status="pinning", pin_intent=event.intent_id)
        if candidate is None:
            return Candidate(**fields)
        return replace(candidate, **fields, commit=None, diverged_commit=None)  # pinned again after a release
    assert candidate is not None, f"{event.type_name()} before CandidatePinRequested"
    candidate = replace(candidate, version=event.version)
    if isinstance(event, ev.CandidatePinned):
        return replace(candidate, status="pinned", pin_intent=None, commit=event.commit)
    if isinstance(event, ev.CandidateDiverged):
        return replace(candidate, status="diverged", pin_intent=None, diverged_commit=event.found)
    if isinstance(event, ev.CandidateReleaseRequested):
        return replace(candidate, status="releasing", release_intent=event.intent_id, release_failure=None)
    if isinstance(event, ev.CandidateReleased):
        return replace(candidate, status="released", release_intent=None)
    if isinstance(event, ev.CandidateReleaseFailed):
        return replace(candidate, status="pinned", release_intent=None, release_failure=event.code)
    if isinstance(event, ev.CheckRequested):
        run = CheckRun(event.check_id, event.check, event.attempt, event.config_sha256, event.argv_sha256,
                       event.required, event.timeout_ms, event.idle_timeout_ms, event.execution, event.repository,
                       event.artifact_dir)
        return replace(candidate, checks=(*candidate.checks, run))
    if isinstance(event, ev.HandoffOffered):
        return replace(candidate, handoff="offered", handoff_code=None)
    if isinstance(event, ev.HandoffConfirmed):
        return replace(candidate, handoff="confirmed", handoff_code=None)
    if isinstance(event, ev.HandoffRejected):
        return replace(candidate, handoff="rejected", handoff_code=event.code)
    if isinstance(event, ev.IntentOutcomeUnknown | ev.IntentOutcomeUnknownV2):
        return candidate
    if isinstance(event, ev.IntentCancelled):
        return _cancelled(candidate, event.intent_id)
    check_id = getattr(event, "check_id", None)
    if check_id is not None:
        return _with_check(candidate, check_id, _apply_check(candidate.check_run(check_id), event))
    raise TypeError(f"Candidate cannot apply {event.type_name()}")


def _apply_check(run: CheckRun, event: ev.Event) -> CheckRun:
    if isinstance(event, ev.ExecutionRequested):
        return replace(run, execution_intent=event.intent_id, host=getattr(event, "host", None))
    if isinstance(event, ev.ExecutionCreated):
        return replace(run, execution_intent=None, execution_state="ready")
    if isinstance(event, ev.ExecutionFailed):
        return replace(run, execution_intent=None, execution_state="failed")
    if isinstance(event, ev.CheckLaunchRequested):
        return replace(run, launch_intent=event.intent_id, log_path=event.log_path)
    if isinstance(event, ev.CheckLaunched):
        return replace(run, launch_intent=None, process=process_of(event.process),
                       supervisor=process_of(event.supervisor), launched_at=event.recorded_at)
    if isinstance(event, ev.CheckLaunchFailed):
        return replace(run, launch_intent=None, launch_failure=event.code)
    if isinstance(event, ev.CheckTestsReported):
        failing = tuple(TestFailure(f.id, f.outcome, f.message) for f in event.failing)
        return replace(run, tests=TestsReported(
            failing, event.problem, event.judge, event.base_check_id,
            None if event.new_failures is None else tuple(event.new_failures),
            None if event.known_failures is None else tuple(event.known_failures)))
    if isinstance(event, ev.CheckPassed):
        return replace(run, result="passed", output_sha256=event.output_sha256)
    if isinstance(event, ev.CheckFailed):
        return replace(run, result="failed", result_code=event.code, result_message=event.message,
                       output_sha256=event.output_sha256)
    if isinstance(event, ev.CheckTimedOut):
        return replace(run, result="timed-out", result_code=event.cause, output_sha256=event.output_sha256)
    if isinstance(event, ev.ExecutionRemovalRequested):
        return replace(run, removal_intent=event.intent_id, execution_state="removing")
    if isinstance(event, ev.ExecutionRemoved):
        return replace(run, removal_intent=None, execution_state="removed")
    raise TypeError(f"Candidate cannot apply {event.type_name()}")


def _cancelled(candidate: Candidate, intent_id: str) -> Candidate:
    if candidate.pin_intent == intent_id:
        return replace(candidate, status="diverged", pin_intent=None)  # never pinned: nothing to check or hand off
    if candidate.release_intent == intent_id:
        return replace(candidate, status="pinned", release_intent=None)
    for run in candidate.checks:
        if run.execution_intent == intent_id:
            return _with_check(candidate, run.check_id, replace(run, execution_intent=None, execution_state="failed"))
        if run.launch_intent == intent_id:
            return _with_check(candidate, run.check_id, replace(run, launch_intent=None, launch_failure="cancelled"))
        if run.removal_intent == intent_id:
            return _with_check(candidate, run.check_id, replace(run, removal_intent=None))
    return candidate


def _with_check(candidate: Candidate, check_id: str, updated: CheckRun) -> Candidate:
    return replace(candidate, checks=tuple(updated if run.check_id == check_id else run for run in candidate.checks))


# --- the pin -------------------------------------------------------------------------------------------------------


def request_pin(existing: Candidate | None, run: Run, *, intent_id: str, task_id: str, worker_id: str | None,
                generation: int | None, boundary: str, binding_id: str, repository: str, worktree: str, ref: str,
                parent: str, tree: str, base: str, changed_paths: Sequence[str], now: str) -> list[ev.Event]:
    """The intent to pin this capture; nothing when the same capture is pinned, or being pinned, already."""
    if existing is not None:
        if existing.status in ("pinning", "pinned", "releasing"):
            return []
        if existing.status == "diverged":
            raise Refused(Code.CANDIDATE_DIVERGED, f"{existing.ref} names another commit than this capture's; "
                                                "it is left untouched (see 'docket log')")
    require_open(run)
    version = existing.version if existing is not None else 0
    on_remote = {} if run.remote is None else {"remote": run.remote[0], "remote_url": run.remote[1]}
    return [next_event(ev.CandidatePinRequestedV2 if run.remote else ev.CandidatePinRequested, stream_of(binding_id),
                       version, now, intent_id=intent_id, run_id=run.run_id, task_id=task_id, worker_id=worker_id,
                       generation=generation, boundary=boundary, binding_id=binding_id, repository=repository,
                       worktree=worktree, ref=ref, parent=parent, tree=tree, base=base,
                       changed_paths=sorted(set(changed_paths)), **on_remote)]


def decide_pin(candidate: Candidate, intent: ev.CandidatePinRequested, observed: CandidateRefObservation,
               now: str) -> ev.Event | Unknown | Act:

    stream = stream_of(candidate.binding_id)
    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, task_id=intent.task_id,
                  binding_id=intent.binding_id, ref=intent.ref)
    if observed.state == "missing":
        return Act()
    if observed.state == "matching" and isinstance(intent, ev.CandidatePinRequestedV2):
        assert observed.commit is not None
        on_remote = _on_remote(candidate, intent, observed.commit, observed.remote, now)
        if on_remote is not None:
            return on_remote
    if observed.state == "matching":
        assert observed.commit is not None
        return next_event(ev.CandidatePinned, stream, candidate.version, now, **common, commit=observed.commit,
                          tree=intent.tree, parent=intent.parent, base=intent.base,
                          changed_paths=list(intent.changed_paths), result="observed")
    if observed.state == "diverged":
        found = observed.commit if observed.commit and len(observed.commit) in (40, 64) else None
        return next_event(ev.CandidateDiverged, stream, candidate.version, now, **common, found=found,
                          message=(observed.detail or f"{intent.ref} names another commit")[:4000])
    return Unknown(observed.detail or f"cannot read {intent.ref} in {intent.repository}")


def _on_remote(candidate: Candidate, intent: ev.CandidatePinRequestedV2, commit: str,
               remote: RemoteRefObservation | None, now: str) -> ev.Event | Unknown | Act | None:
    """With the commit pinned here: what the shared remote's ref decides (None: it names the commit too, so the pin
    is done). Absent there: Act (the push). Naming another commit: diverged, nothing forced. Not reached: unknown."""

    where = f"{intent.ref} on the remote {intent.remote} ({intent.remote_url})"
    if remote is None or remote.state == "unreachable":
        return Unknown(f"{where} cannot be read: {remote.detail if remote else 'not looked at'}"[:4000])
    if remote.state == "missing":
        return Act()
    if remote.commit == commit:
        return None
    found = remote.commit if remote.commit and len(remote.commit) in (40, 64) else None
    return next_event(ev.CandidateDiverged, stream_of(candidate.binding_id), candidate.version, now,
                      intent_id=intent.intent_id, run_id=intent.run_id, task_id=intent.task_id,
                      binding_id=intent.binding_id, ref=intent.ref, found=found,
                      message=f"{where} names {remote.commit}, not the pinned {commit}; nothing was forced"[:4000])


def made(outcome: ev.Event) -> ev.Event:
    """After an act: the outcome made now, rather than found (pinned, released, created, removed)."""
    updates = {ev.CandidatePinned: "created", ev.CandidateReleased: "released", ev.ExecutionCreated: "created",
               ev.ExecutionRemoved: "removed"}
    result = updates.get(type(outcome))
    return outcome.model_copy(update={"result": result}) if result else outcome


def recordable(changed: Sequence[str]) -> bool:
    """Whether a candidate can record these changed paths (quoted): at most MAX_CHANGED_PATHS of them, with at most
    MAX_CHANGED_CHARS characters together (read when asked: tests lower them)."""

    return len(changed) <= limits.MAX_CHANGED_PATHS and sum(map(len, changed)) <= limits.MAX_CHANGED_CHARS


def require_recordable(changed: Sequence[str], where: str, *, at_least: bool = False) -> None:
    """Refused ``too-many-changes`` unless recordable(changed); where names the worktree, at_least says changed is
    only part of what changes."""

    if recordable(changed):
        return
    more = "at least " if at_least else ""
    raise Refused(Code.TOO_MANY_CHANGES, f"{where} changes {more}{len(changed)} paths ({more}"
                                      f"{sum(map(len, changed))} characters); a candidate records at most "
                                      f"{limits.MAX_CHANGED_PATHS} paths and {limits.MAX_CHANGED_CHARS} characters (is "
                                      "a build folder not ignored?); nothing was pinned")


def request_release(candidate: Candidate, *, intent_id: str, reason: str, now: str) -> list[ev.Event]:
    """The intent to delete the candidate's ref from its pinned commit; nothing when released or releasing."""
    if candidate.status in ("released", "releasing"):
        return []
    if candidate.status != "pinned" or candidate.commit is None:
        raise Refused(Code.CANDIDATE_NOT_PINNED, f"candidate {candidate.binding_id} is {candidate.status}, not pinned")
    return [next_event(ev.CandidateReleaseRequested, stream_of(candidate.binding_id), candidate.version, now,
                       intent_id=intent_id, run_id=candidate.run_id, binding_id=candidate.binding_id,
                       repository=candidate.repository, ref=candidate.ref, commit=candidate.commit,
                       parent=candidate.parent, tree=candidate.tree, reason=reason[:4000] or "released")]


def decide_release(candidate: Candidate, intent: ev.CandidateReleaseRequested, observed: CandidateRefObservation,
                   now: str) -> ev.Event | Unknown | Act:

    stream = stream_of(candidate.binding_id)
    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, binding_id=intent.binding_id)
    if observed.state == "missing":
        return next_event(ev.CandidateReleased, stream, candidate.version, now, **common, result="observed")
    if observed.state == "matching" and observed.commit == intent.commit:
        return Act()
    if observed.state in ("matching", "diverged"):
        return next_event(ev.CandidateReleaseFailed, stream, candidate.version, now, **common,
                          code="candidate-diverged",
                          message=f"{intent.ref} names {observed.commit or 'something else'}, not the pinned "
                                  f"{intent.commit}; it is left untouched")
    return Unknown(observed.detail or f"cannot read {intent.ref} in {intent.repository}")


def preserved_by_target(candidate: Candidate, history: TargetHistory) -> tuple[bool, str]:
    """Whether the target's history holds the candidate's work (so its ref may go), and why, or why not.

    It does when the candidate's commit is reachable from the target; or a
    reachable commit has the candidate's tree on the candidate's parent (the same
    change committed again, or a merge that is exactly it); or the candidate
    changes nothing against its parent and the parent is reachable (a merge
    queue's verification of a merge). Anything else, or a walk that stopped
    before it saw everything, keeps the candidate.
    """
    if candidate.commit is None:
        return False, f"candidate {candidate.binding_id[:12]} was never pinned"
    history_of = f"the history of {history.branch}"
    if candidate.commit in history.commits:
        return True, f"its commit {candidate.commit[:12]} is in {history_of}"
    twin = history.trees_on_parents.get((candidate.tree, candidate.parent))
    if twin is not None:
        return True, f"commit {twin[:12]} of {history_of} has its tree on its parent"
    parent = history.commits.get(candidate.parent)
    if parent is not None and parent[0] == candidate.tree:
        return True, f"it changes nothing against its parent {candidate.parent[:12]}, which is in {history_of}"
    if history.tip is None:
        return False, history.detail or f"the target {history.branch} does not exist"
    if not history.complete:
        return False, (f"its commit {candidate.commit[:12]} is not among the {len(history.commits)} commits of "
                       f"{history.branch} looked at ({history.detail or 'docket looks no further'})")
    return False, f"its commit {candidate.commit[:12]} is not in {history_of}"
