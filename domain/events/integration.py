"""Events of the Integration aggregate (stream ``integration:<run>``): approval, the merge queue, the target's
move and the sealed receipt.

The queue is fixed once by IntegrationPrepared: the target branch, the commit it
is expected to name, and the ordered steps (one confirmed candidate each). Each
step is merged in the object store before its intent is recorded (the merge is
deterministic, so the intent names the merge commit); the intent moves
``refs/docket/integrations/<run>`` by compare-and-swap. A merged step is then
re-verified: its tree is pinned as a candidate of the step's task and the
required checks run on it. After the last step, one intent moves the target
branch from the expected commit. A run's receipt is sealed once, on this stream.
"""


from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, JsonValue, SerializerFunctionWrapHandler,
                      StringConstraints, model_serializer)

from ..kernel.canonical import check_canonical_value

from ..kernel.values import MAX_SAFE_INT
from .base import (AbsolutePath, BranchName, Code, Commit, Event, Generation, Id, Position, RemoteName, RemoteUrl,
                   RepositoryPath, Sha256, Text)
from .candidate import TreePath
from .handoff import CheckBinding

__all__ = [
    "ApprovalRecorded",
    "ApprovedCandidate",
    "IntegrationCompleted",
    "IntegrationPrepared",
    "IntegrationPreparedV2",
    "IntegrationQueueClosed",
    "IntegrationStep",
    "IntegrationStepConflicted",
    "IntegrationStepFailed",
    "IntegrationStepMerged",
    "IntegrationStepQueued",
    "IntegrationStepRejected",
    "IntegrationStepRequested",
    "IntegrationStepRequestedV2",
    "IntegrationStepVerified",
    "IntegrationTargetMoved",
    "IntegrationTargetRequested",
    "IntegrationTargetRequestedV2",
    "IntegrationTargetRequestedV3",
    "PathOverlapWarning",
    "ReceiptSealed",
    "RequiredCheck",
    "IntegrationTargetMovedByOthers",
    "IntegrationRequeued",
    "IntegrationBatchVerified",
    "IntegrationBatchFailed",
    "IntegrationBatchRequeued",
    "IntegrationVerificationStarted",
    "IntegrationVerificationCancelled",
]

MAX_STEPS = 10_000
Step = Annotated[int, Field(ge=1, le=MAX_STEPS)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
IntegrationRef = Annotated[str, StringConstraints(pattern=r"^refs/docket/integrations/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
TargetRef = Annotated[str, StringConstraints(min_length=12, max_length=266, pattern=r"^refs/heads/[^\x00-\x20]+$")]
ConflictPaths = Annotated[list[TreePath], Field(max_length=1000)]


def _canonical(value: dict) -> dict:  # type: ignore[type-arg]
    check_canonical_value(value)  # no floats: the receipt's digest is over its canonical JSON
    return value


Receipt = Annotated[dict[str, JsonValue], AfterValidator(_canonical)]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class ApprovedCandidate(_Part):
    task_id: Id
    binding_id: Sha256
    commit: Commit


class ApprovalRecorded(Event):
    """Someone approved these candidates of the run for integration (``docket approve``)."""

    name = "ApprovalRecorded"
    run_id: Id
    by: Name
    candidates: Annotated[list[ApprovedCandidate], Field(min_length=1, max_length=MAX_STEPS)]


class IntegrationStep(_Part):
    """One step of the queue: a confirmed candidate, by the worker generation that made it."""

    task_id: Id
    binding_id: Sha256
    commit: Commit
    worker_id: Id
    generation: Generation


class RequiredCheck(_Part):
    """A check every merged step must pass again, under this configuration."""

    check: Id
    config_sha256: Sha256


class PathOverlapWarning(_Part):
    """Two steps change the same paths (or a path and a folder holding the other's): they may conflict.

    whole_files (absent in ledgers written before it, and from a fixed queue: every path compared as a path): the
    paths were compared line by line against the two candidates' common base, and paths lists those whose changes
    overlap or meet; whole_files lists those of them that could not be compared by lines (binary, not a regular
    file, too large, a file against a folder), changed by both as whole files."""

    first_task: Id
    second_task: Id
    paths: ConflictPaths
    whole_files: ConflictPaths | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a warning compared as paths has the shape it always had (and the same digest in a receipt)
        dumped: dict[str, Any] = handler(self)
        if dumped.get("whole_files") is None:
            dumped.pop("whole_files", None)
        return dumped


class IntegrationPrepared(Event):
    """The queue, fixed: the target branch, the commit it names now (the first step merges into it), the steps in
    task order, the checks each merged step must pass again, and which steps change the same paths."""

    name = "IntegrationPrepared"
    run_id: Id
    repository: RepositoryPath
    target_branch: BranchName
    target_ref: TargetRef
    expected_commit: Commit
    integration_ref: IntegrationRef
    steps: Annotated[list[IntegrationStep], Field(min_length=1, max_length=MAX_STEPS)]
    required_checks: Annotated[list[RequiredCheck], Field(max_length=1000)]
    overlaps: Annotated[list[PathOverlapWarning], Field(max_length=1000)]
    approved_by: Annotated[list[Name], Field(max_length=1000)]  # empty unless approval is required


class IntegrationPreparedV2(Event):
    """The queue, opened as a merge queue that goes on (``docket go``): the target branch, the commit it names now
    and the checks each merged step must pass again. Steps are queued as their tasks pass (IntegrationStepQueued,
    none at first); a step that conflicts or is rejected is dropped and the next one merges into the same head; the
    target moves as verified steps accumulate (each move from the commit the last one left); IntegrationQueueClosed
    says no step comes any more."""

    name = "IntegrationPrepared"
    schema_version = 2
    run_id: Id
    repository: RepositoryPath
    target_branch: BranchName
    target_ref: TargetRef
    expected_commit: Commit
    integration_ref: IntegrationRef
    steps: Annotated[list[IntegrationStep], Field(max_length=MAX_STEPS)]
    required_checks: Annotated[list[RequiredCheck], Field(max_length=1000)]
    overlaps: Annotated[list[PathOverlapWarning], Field(max_length=1000)]
    approved_by: Annotated[list[Name], Field(max_length=1000)]


class IntegrationStepQueued(Event):
    """A step appended to a merge queue that goes on (IntegrationPrepared v2): a task's confirmed candidate, once
    the steps of the tasks it depends on are verified; overlaps: the earlier steps whose changes meet its own (the
    same lines of a path, or a whole file that cannot be compared by lines); predicted_conflicts: the paths it
    conflicts on merged onto the integration tip as it was queued."""

    name = "IntegrationStepQueued"
    run_id: Id
    step: Step
    task_id: Id
    binding_id: Sha256
    commit: Commit
    worker_id: Id
    generation: Generation
    overlaps: Annotated[list[PathOverlapWarning], Field(max_length=1000)]
    # the paths the candidate conflicts on merged onto the integration tip as it was queued (empty: it merged, or
    # ledgers written before the prediction); the step is merged as any other when its turn comes
    predicted_conflicts: ConflictPaths = []


class IntegrationQueueClosed(Event):
    """Every task of the run has finished: no step is queued any more (IntegrationPrepared v2)."""

    name = "IntegrationQueueClosed"
    run_id: Id
    steps: Annotated[int, Field(ge=0, le=MAX_STEPS)]


class IntegrationStepRequested(Event):
    """Intent: move the integration ref from head (absent for the first step) to merge_commit, computed already.

    merge: "merged" for a new two-parent merge commit; "already-merged" when the
    candidate is already in head's history (merge_commit is head: nothing to merge).
    merged_onto and merge_message (absent in ledgers written before them): the commit the merge was computed on
    and its message, so the act can compute the same merge commit again when a prune took it before the ref moved.
    """

    name = "IntegrationStepRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    step: Step
    task_id: Id
    binding_id: Sha256
    candidate_commit: Commit
    repository: RepositoryPath
    integration_ref: IntegrationRef
    head: Commit
    merge_commit: Commit
    tree: Commit
    merge: Literal["merged", "already-merged"]
    merged_onto: Commit | None = None
    merge_message: Text | None = None


class IntegrationStepRequestedV2(IntegrationStepRequested):
    """Intent: move the integration ref as v1 does, on the run's shared git remote as well, by compare-and-swap from
    head there (create-only for the first step), so that whichever machine drives the queue next finds every merge.
    Merged once the remote's ref names merge_commit; the remote unreachable leaves the intent waiting; the remote's
    ref naming anything else is the step failed, nothing forced. remote, remote_url: the run's
    (RunBasePinRequested.v2)."""

    schema_version = 2
    remote: RemoteName
    remote_url: RemoteUrl


class IntegrationStepMerged(Event):
    """Outcome: the integration ref names the step's merge commit; moved now (created) or found so (observed)."""

    name = "IntegrationStepMerged"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    step: Step
    task_id: Id
    binding_id: Sha256
    merge_commit: Commit
    tree: Commit
    merge: Literal["merged", "already-merged"]
    result: Literal["created", "observed"]


class IntegrationStepFailed(Event):
    """Outcome: the integration ref names something else than the step's head or merge (it was moved outside
    docket) or cannot be read as one; it is left untouched and the queue stops."""

    name = "IntegrationStepFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    step: Step
    code: Code
    found: Commit | None
    message: Text


class IntegrationStepConflicted(Event):
    """The step's candidate does not merge into the integration head: the queue stops with nothing moved."""

    name = "IntegrationStepConflicted"
    run_id: Id
    step: Step
    task_id: Id
    binding_id: Sha256
    head: Commit
    reason: Literal["conflicted", "unmergeable"]
    paths: ConflictPaths  # the conflicting paths (quoted as candidates quote them), when conflicted
    message: Text


class IntegrationStepVerified(Event):
    """Every required check passed again on the merged step's tree, pinned as candidate verification_binding."""

    name = "IntegrationStepVerified"
    run_id: Id
    step: Step
    task_id: Id
    verification_binding: Sha256
    tree: Commit
    checks: Annotated[list[CheckBinding], Field(max_length=1000)]


class IntegrationStepRejected(Event):
    """A required check did not pass on the merged step's tree: the queue stops there with the target unmoved."""

    name = "IntegrationStepRejected"
    run_id: Id
    step: Step
    task_id: Id
    verification_binding: Sha256
    check: Id
    check_id: Id
    code: Code
    message: Text


class IntegrationTargetRequested(Event):
    """Legacy (v1): intent to move the target branch from expected_commit to commit, compare-and-swap; never under
    a checkout."""

    name = "IntegrationTargetRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    repository: RepositoryPath
    target_ref: TargetRef
    expected_commit: Commit
    commit: Commit
    tree: Commit


class IntegrationTargetRequestedV2(Event):
    """Intent: move the target branch from expected_commit to commit (the last step's head), compare-and-swap.

    checkout: the worktree that has the target checked out, clean, when the
    intent was recorded (null: none had): its index and files are moved from
    expected_commit's tree to commit's first (a two-tree merge, as git's
    ``updateInstead``), then the branch; if the branch was moved by someone else
    in between, they are moved back before the outcome is recorded.
    """

    name = "IntegrationTargetRequested"
    schema_version = 2
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    repository: RepositoryPath
    target_ref: TargetRef
    expected_commit: Commit
    commit: Commit
    tree: Commit
    checkout: AbsolutePath | None


class IntegrationTargetRequestedV3(IntegrationTargetRequestedV2):
    """Intent: move the target branch on the run's shared git remote from expected_commit to commit, by
    compare-and-swap: pushed only while the remote still has expected_commit, nothing forced (the remote having moved
    is IntegrationTargetMoved). The clones' own branches are their owners' (``git pull``); checkout is always null.
    remote, remote_url: the run's (RunBasePinRequested.v2)."""

    schema_version = 3
    remote: RemoteName
    remote_url: RemoteUrl


class IntegrationCompleted(Event):
    """Outcome: the target branch names the integrated commit; moved now (created) or found so (observed)."""

    name = "IntegrationCompleted"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    target_ref: TargetRef
    previous: Commit
    commit: Commit
    tree: Commit
    result: Literal["created", "observed"]


class IntegrationTargetMoved(Event):
    """Outcome: the target branch no longer names the expected commit (code ``target-moved``), or is checked out
    in a worktree the intent may not update, or whose index or files have local changes (``target-checked-out``),
    or cannot be read; nothing was reset or forced and the docket refs stay."""

    name = "IntegrationTargetMoved"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    target_ref: TargetRef
    expected_commit: Commit
    found: Commit | None
    code: Code
    message: Text


class IntegrationTargetMovedByOthers(Event):
    """The target branch was found at a commit docket did not leave it at: when the merge queue opened, not at the
    run's base (seen ``queue-opened``: the queue goes on from what the target names, and this says what in it docket
    never saw), or, when the target was to move, not where docket last left it (seen ``target-moved``: nothing was
    moved, IntegrationTargetMoved). foreign_commits: the commits found holds that expected does not (``git rev-list
    found ^expected``), newest first, at most 1000; foreign_count: how many were walked, complete: the walk ended;
    keeps_expected: found still holds expected (False: the history the run stood on was rewritten or dropped)."""

    name = "IntegrationTargetMovedByOthers"
    run_id: Id
    target_ref: TargetRef
    expected_commit: Commit
    found: Commit
    seen: Literal["queue-opened", "target-moved"]
    foreign_commits: Annotated[list[Commit], Field(max_length=1000)]
    foreign_count: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    complete: bool
    keeps_expected: bool


class IntegrationRequeued(Event):
    """A queue that goes on, whose target move found the target moved (IntegrationTargetMoved ``target-moved``),
    goes on from where the target is now (onto) instead of stopping: the verified steps that had not reached the
    target, and the steps merged on top of them and not verified yet (requeued, by number) are settled as requeued and queued again, in order, from step first_step: each is
    merged onto onto, re-verified and delivered by compare-and-swap as any step is, or conflicts there (that task's
    conflict); a step still waiting to merge merges onto onto as it comes. moved_by: the other docket runs of this ledger whose target moves
    brought the target from expected_commit to onto (docket_commits: their merge commits on its first-parent
    line); empty when someone else moved it, recorded with IntegrationTargetMovedByOthers (only a move that kept
    expected_commit is re-queued onto). round: how many times the queue was re-queued, this one included."""

    name = "IntegrationRequeued"
    run_id: Id
    round: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
    target_ref: TargetRef
    expected_commit: Commit
    onto: Commit
    moved_by: Annotated[list[Id], Field(max_length=1000)]
    docket_commits: Annotated[list[Commit], Field(max_length=1000)]
    requeued: Annotated[list[Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]], Field(max_length=10_000)]
    first_step: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]


class IntegrationBatchVerified(Event):
    """``[integration] batch``: every required check passed on the merged tree of step last_step (pinned as
    candidate verification_binding), which holds the merges of steps first_step..last_step (tasks, in order) on
    top of the verified head: those steps are verified by this one check run. The merge commits of the steps
    before last_step were not checked on their own."""

    name = "IntegrationBatchVerified"
    run_id: Id
    first_step: Step
    last_step: Step
    tasks: Annotated[list[Id], Field(max_length=MAX_STEPS)]
    verification_binding: Sha256
    tree: Commit
    checks: Annotated[list[CheckBinding], Field(max_length=1000)]


class IntegrationBatchFailed(Event):
    """``[integration] batch``: a required check did not pass on the merged tree of step last_step, which holds
    the merges of steps first_step..last_step on top of the verified head: the step that breaks it is among them,
    and the batch is bisected (the next check runs on the merge of step (first_step - 1 + last_step) // 2) until the
    first step whose merge fails is found; that one is rejected (IntegrationStepRejected)."""

    name = "IntegrationBatchFailed"
    run_id: Id
    first_step: Step
    last_step: Step
    verification_binding: Sha256
    tree: Commit
    check: Id
    check_id: Id
    code: Code
    message: Text


class IntegrationBatchRequeued(Event):
    """``[integration] batch``: the steps merged after a rejected step of a batch (requeued, by number) were merged
    on top of it; they are settled as requeued and queued again, in order, from step first_step, onto the
    verified head onto."""

    name = "IntegrationBatchRequeued"
    run_id: Id
    rejected_step: Step
    requeued: Annotated[list[Step], Field(max_length=MAX_STEPS)]
    first_step: Step
    onto: Commit


class IntegrationVerificationStarted(Event):
    """``[integration] speculate``: the required checks start on the merged tree of step last_step (pinned as
    candidate verification_binding, commit merge_commit), which holds the merges of steps first_step..last_step
    (tasks, in order) on top of head. assumed: the steps ahead of first_step not verified when it started (their
    merges are in head); its result stands only once every one of them is verified. When one of them, or one of
    its own steps, is dropped or queued again first, it is cancelled (IntegrationVerificationCancelled) and what it
    covered is checked again on the new head."""

    name = "IntegrationVerificationStarted"
    run_id: Id
    first_step: Step
    last_step: Step
    tasks: Annotated[list[Id], Field(max_length=MAX_STEPS)]
    head: Commit
    merge_commit: Commit
    tree: Commit
    assumed: Annotated[list[Step], Field(max_length=MAX_STEPS)]
    verification_binding: Sha256


class IntegrationVerificationCancelled(Event):
    """``[integration] speculate``: the verification of steps first_step..last_step (candidate verification_binding)
    ends unused: step because_of, which it assumed or covered, was dropped or queued again (reason), so the tree it
    checks is not what the target will hold. Its checks still running are stopped (each recorded failed,
    speculation-cancelled, its execution removed); a result it reached is not used."""

    name = "IntegrationVerificationCancelled"
    run_id: Id
    first_step: Step
    last_step: Step
    verification_binding: Sha256
    because_of: Step
    reason: Code
    message: Text


class ReceiptSealed(Event):
    """The run's receipt, sealed once: what was delivered, the ledger head it was sealed at and the RFC 9162 Merkle
    root over the chain digests of positions 1..ledger_position (see docs/receipts.md)."""

    name = "ReceiptSealed"
    run_id: Id
    receipt_sha256: Sha256  # sha256 of the receipt's canonical JSON
    ledger_position: Position
    ledger_digest: Sha256
    merkle_root: Sha256
    receipt: Receipt
    cited_positions: Annotated[list[Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]], Field(max_length=100_000)]
