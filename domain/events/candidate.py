"""Events of the Candidate aggregate (stream ``candidate:<binding id>``): its pin, its checks and their executions.

A candidate is one capture of a task's worktree, named by its binding id. Every
check run against it lives on the same stream, so attempts are numbered in one
place and a check can only ever be bound to the candidate it ran on.
CandidateUnstable has no binding id (nothing was pinned): it is recorded on the
task's stream.
"""


from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..kernel.values import MAX_DURATION_MS, MAX_SAFE_INT
from ..containment.sandbox import SandboxRecord
from .base import (AbsolutePath, Code, Commit, Event, Generation, Host, Id, RemoteName, RemoteUrl, RepositoryPath,
                   Sha256, Tail, Text)
from .worker import ProcessIdentity

__all__ = [
    "ArtifactRecord",
    "CandidateDiverged",
    "CandidatePinRequested",
    "CandidatePinRequestedV2",
    "CandidatePinned",
    "CandidateReleaseFailed",
    "CandidateReleaseRequested",
    "CandidateReleased",
    "CandidateUnstable",
    "CheckFailed",
    "CheckLaunchFailed",
    "CheckLaunchRequested",
    "CheckLaunched",
    "CheckPassed",
    "CheckRequested",
    "CheckTestsReported",
    "CheckTimedOut",
    "ExecutionCreated",
    "ExecutionFailed",
    "ExecutionRemovalRequested",
    "ExecutionRemoved",
    "ExecutionRequested",
    "ExecutionRequestedV2",
    "TestFailureRecord",
]

MAX_CHANGED_PATHS = 100_000
MAX_CHANGED_CHARS = 8_000_000  # all changed paths of one capture, together: bounds an event's size
TreePath = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")]
ChangedPaths = Annotated[list[TreePath], Field(max_length=MAX_CHANGED_PATHS)]
CandidateRef = Annotated[str, StringConstraints(pattern=r"^refs/docket/candidates/[A-Za-z0-9][A-Za-z0-9._-]{0,127}/"
                                                        r"[0-9a-f]{64}$")]
Attempt = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
DurationMs = Annotated[int, Field(ge=0, le=MAX_DURATION_MS)]
Bytes = Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
MAX_FAILING_TESTS = 10_000  # as domain.junit.MAX_FAILING


class CandidatePinRequested(Event):
    """Intent: pin a capture of the task's worktree as a commit of tree on parent, at ref, create-only.

    The capture itself (two agreeing passes over the worktree) is done before this
    is recorded; its objects are in the repository, unreferenced until the pin.
    """

    name = "CandidatePinRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    task_id: Id
    worker_id: Id | None
    generation: Generation | None  # the worker's generation the capture closes, if a worker made it
    boundary: Code  # which phase the capture closes: worker-exit, manual, ...
    binding_id: Sha256
    repository: RepositoryPath  # the git common dir
    worktree: AbsolutePath
    ref: CandidateRef
    parent: Commit  # the worktree's HEAD when it was captured
    tree: Commit
    # the task's base commit (a merge step's verification: the integration head its steps merged onto):
    # changed_paths are against its tree
    base: Commit
    changed_paths: ChangedPaths


class CandidatePinRequestedV2(CandidatePinRequested):
    """Intent: pin the capture as v1 does, and push the commit to the run's shared git remote under the same ref,
    create-only there too (a ref there that names the same commit is found, not pushed again). Pinned once both name
    it; the remote unreachable leaves the intent waiting; the remote's ref naming another commit is a divergence.
    remote, remote_url: the run's (RunBasePinRequested.v2)."""

    schema_version = 2
    remote: RemoteName
    remote_url: RemoteUrl


class CandidatePinned(Event):
    """Outcome: the candidate commit is at its ref; pinned now (created) or found there already (observed)."""

    name = "CandidatePinned"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    task_id: Id
    binding_id: Sha256
    ref: CandidateRef
    commit: Commit
    tree: Commit
    parent: Commit
    base: Commit
    changed_paths: ChangedPaths
    result: Literal["created", "observed"]


class CandidateDiverged(Event):
    """Outcome: something else is at the candidate's ref (another tree or parent); it is left untouched."""

    name = "CandidateDiverged"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    task_id: Id
    binding_id: Sha256
    ref: CandidateRef
    found: Commit | None  # what the ref names, if it names an object at all
    message: Text


class CandidateUnstable(Event):
    """Two captures of the task's worktree differed (it was still being written): nothing was pinned."""

    name = "CandidateUnstable"
    run_id: Id
    task_id: Id
    worker_id: Id | None
    generation: Generation | None
    boundary: Code
    differing_paths: ChangedPaths


class CandidateReleaseRequested(Event):
    """Intent: delete the candidate's ref, but only while it still names the pinned commit."""

    name = "CandidateReleaseRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    binding_id: Sha256
    repository: RepositoryPath
    ref: CandidateRef
    commit: Commit
    parent: Commit
    tree: Commit
    reason: Text


class CandidateReleased(Event):
    """Outcome: the candidate's ref is gone; deleted now (released) or already gone (observed)."""

    name = "CandidateReleased"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    binding_id: Sha256
    result: Literal["released", "observed"]


class CandidateReleaseFailed(Event):
    """Outcome: the ref names another commit than the pinned one; it is left untouched."""

    name = "CandidateReleaseFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    binding_id: Sha256
    code: Code
    message: Text


class CheckRequested(Event):
    """A named check is to run against the candidate's commit: attempt n, bound to the check's configuration."""

    name = "CheckRequested"
    check_id: Id
    run_id: Id
    task_id: Id
    binding_id: Sha256
    commit: Commit
    check: Id
    attempt: Attempt
    config_sha256: Sha256  # digest of the [checks.NAME] configuration it runs under
    argv_sha256: Sha256  # the exact argv, as canonical JSON
    required: bool
    timeout_ms: Annotated[int, Field(gt=0, le=MAX_DURATION_MS)]
    idle_timeout_ms: Annotated[int, Field(gt=0, le=MAX_DURATION_MS)] | None
    execution: AbsolutePath
    repository: RepositoryPath
    artifact_dir: TreePath | None


class ExecutionRequested(Event):
    """Intent: a detached worktree at the candidate's commit, fresh or reused only when clean at that commit."""

    name = "ExecutionRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    check_id: Id
    binding_id: Sha256
    repository: RepositoryPath
    path: AbsolutePath
    commit: Commit


class ExecutionRequestedV2(ExecutionRequested):
    """Intent: the execution as v1 asks, on one host (host: whose data folder path is in, and whose clone
    repository is). Only a docket on that host makes it; a docket that took the run over from that host cancels it
    (IntentCancelled), and the check runs again on its own host."""

    schema_version = 2
    host: Host


class ExecutionCreated(Event):
    """Outcome: the execution is ready at its path; made now (created) or found ready (observed)."""

    name = "ExecutionCreated"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    check_id: Id
    path: AbsolutePath
    commit: Commit
    result: Literal["created", "observed"]


class ExecutionFailed(Event):
    """Outcome: the execution cannot be made (something else is at its path; code says what)."""

    name = "ExecutionFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    check_id: Id
    code: Code
    message: Text


class CheckLaunchRequested(Event):
    """Intent: start the check's command in its execution, held at a gate until its identity is recorded."""

    name = "CheckLaunchRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    check_id: Id
    binding_id: Sha256
    execution: AbsolutePath
    log_path: AbsolutePath
    sandbox: SandboxRecord | None = None  # what the check may touch (None: recorded before docket had a sandbox)


class CheckLaunched(Event):
    """Outcome: the check's process exists, held at its gate; who it is. Only then is the gate opened."""

    name = "CheckLaunched"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    check_id: Id
    process: ProcessIdentity
    supervisor: ProcessIdentity


class CheckLaunchFailed(Event):
    """Outcome: the check's command could not be started (code says why); nothing of it runs."""

    name = "CheckLaunchFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    check_id: Id
    code: Code
    message: Text


class ArtifactRecord(BaseModel):
    """One file the check wrote under the artifact directory, copied back to the task's worktree."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    path: TreePath  # relative to the artifact directory
    sha256: Sha256
    size: Bytes


class TestFailureRecord(BaseModel):
    """One test the report says failed (or errored): its id and the first lines of its message, redacted."""

    __test__ = False
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    id: Annotated[str, StringConstraints(min_length=1, max_length=1000, pattern=r"^[^\x00]*$")]
    outcome: Literal["failed", "error"]
    message: Annotated[str, StringConstraints(max_length=400, pattern=r"^[^\x00]*$")]


TestIds = Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=1000, pattern=r"^[^\x00]*$")]],
                    Field(max_length=MAX_FAILING_TESTS)]


class CheckTestsReported(Event):
    """What the check's JUnit XML report said, read after its command ended and before its one result.

    failing: every test it names as failed or errored (problem: why the report could not be used instead: missing,
    refused, malformed, too large). judge is what the result that follows rests on: "exit" (the command's exit
    code), or "relative-to-base": the candidate passes when every failing test was failing on the run's base
    already, in the base's check base_check_id on candidate base_binding_id; new_failures and known_failures split
    the failing ids so.
    """

    name = "CheckTestsReported"
    run_id: Id
    check_id: Id
    binding_id: Sha256
    check: Id
    report: TreePath  # as configured (junit), relative to the execution's root
    report_sha256: Sha256 | None
    problem: Code | None
    problem_message: Text | None
    tests: Bytes
    failing: Annotated[list[TestFailureRecord], Field(max_length=MAX_FAILING_TESTS)]
    judge: Literal["exit", "relative-to-base"]
    base_binding_id: Sha256 | None
    base_check_id: Id | None
    new_failures: TestIds | None
    known_failures: TestIds | None


class _CheckResult(Event):
    """What every result of a check carries: the binding it is for, and what the check printed."""

    run_id: Id
    check_id: Id
    binding_id: Sha256
    check: Id
    config_sha256: Sha256
    duration_ms: DurationMs | None
    output_sha256: Sha256 | None
    output_bytes: Bytes | None
    tail: Tail
    execution: Literal["matching", "mutated", "missing", "none"]  # what inspection found ("none": no execution)
    artifacts: Annotated[list[ArtifactRecord], Field(max_length=10_000)]


class CheckPassed(_CheckResult):
    """The check's command exited 0 (or, judged relative to the base, failed only tests already failing there: the
    CheckTestsReported before it says which) and left its execution as it found it."""

    name = "CheckPassed"


class CheckFailed(_CheckResult):
    """The check did not pass: code says why (exit, signal, mutated, launch-failed, interrupted, artifact-...).
    ``interrupted`` also when the docket supervising the run was interrupted (Ctrl-C, SIGTERM) and stopped the
    check's process group: such a result says nothing of the candidate, and the check runs again on resume."""

    name = "CheckFailed"
    code: Code
    exit_code: Annotated[int, Field(ge=0, le=255)] | None
    signal: Annotated[int, Field(ge=1, le=255)] | None
    message: Text


class CheckTimedOut(_CheckResult):
    """The check ran past its timeout (or its idle timeout) and its process group was stopped."""

    name = "CheckTimedOut"
    cause: Literal["timeout", "idle-timeout"]
    timeout_ms: Annotated[int, Field(gt=0, le=MAX_DURATION_MS)]


class ExecutionRemovalRequested(Event):
    """Intent: remove the check's execution worktree, once no process of its group is alive."""

    name = "ExecutionRemovalRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    check_id: Id
    binding_id: Sha256
    repository: RepositoryPath
    path: AbsolutePath
    process: ProcessIdentity | None  # the check's process, whose group must be gone first


class ExecutionRemoved(Event):
    """Outcome: the execution worktree is gone; removed now or found gone (observed)."""

    name = "ExecutionRemoved"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    check_id: Id
    path: AbsolutePath
    result: Literal["removed", "observed"]
