"""Every event docket records: frozen pydantic models with fixed stored names.

One module per aggregate (``ledger``, ``run``, ``task``, ``worker``, ``lease``, ``candidate``),
one for the effect protocol's own events (``effect``), and the envelope and
field types they share (``base``). The catalogue is built here, in the order
``docs/events.md`` lists it.

Each class declares its ``effect_role`` in the effect protocol: intents (named
``...Requested``) ask for an effect; outcomes carry the ``intent_id`` they
resolve; an "unknown" observation leaves its intent pending.
"""

from __future__ import annotations

from .base import Event
from .candidate import (
    ArtifactRecord,
    CandidateDiverged,
    CandidatePinRequested,
    CandidatePinned,
    CandidateReleaseFailed,
    CandidateReleaseRequested,
    CandidateReleased,
    CandidateUnstable,
    CheckFailed,
    CheckLaunchFailed,
    CheckLaunchRequested,
    CheckLaunched,
    CheckPassed,
    CheckRequested,
    CheckTimedOut,
    ExecutionCreated,
    ExecutionFailed,
    ExecutionRemovalRequested,
    ExecutionRemoved,
    ExecutionRequested,
)
from .effect import IntentCancelled, IntentOutcomeUnknown, IntentOutcomeUnknownV2
from .lease import LeaseExpired, LeaseGranted, LeaseReleased, LeaseRenewed
from .ledger import LedgerCreated, LedgerCreatedV2
from .run import (
    RunAborted,
    RunBasePinFailed,
    RunBasePinned,
    RunBasePinRequested,
    RunCompleted,
    RunOpened,
    RunPaused,
    RunResumed,
    RunSupervised,
    RunUnsupervised,
)
from .task import (
    TaskPlanned,
    TaskPlannedV2,
    WorktreeCreated,
    WorktreeFailed,
    WorktreePrepared,
    WorktreeRemovalFailed,
    WorktreeRemovalRequested,
    WorktreeRemoved,
    WorktreeRequested,
)
from .worker import (
    ProcessIdentity,
    WorkerActionRefused,
    WorkerExited,
    WorkerLaunched,
    WorkerLaunchFailed,
    WorkerLaunchRequested,
    WorkerRegistered,
    WorkerRelaunched,
    WorkerStopped,
    WorkerStopRequested,
)

__all__ = [
    "EVENT_TYPES",
    "Event",
    "ArtifactRecord",
    "CandidateDiverged",
    "CandidatePinRequested",
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
    "CheckTimedOut",
    "ExecutionCreated",
    "ExecutionFailed",
    "ExecutionRemovalRequested",
    "ExecutionRemoved",
    "ExecutionRequested",
    "IntentCancelled",
    "IntentOutcomeUnknown",
    "IntentOutcomeUnknownV2",
    "LeaseExpired",
    "LeaseGranted",
    "LeaseReleased",
    "LeaseRenewed",
    "LedgerCreated",
    "LedgerCreatedV2",
    "RunAborted",
    "RunBasePinFailed",
    "RunBasePinRequested",
    "RunBasePinned",
    "RunCompleted",
    "RunOpened",
    "RunPaused",
    "RunResumed",
    "RunSupervised",
    "RunUnsupervised",
    "ProcessIdentity",
    "TaskPlanned",
    "TaskPlannedV2",
    "WorkerActionRefused",
    "WorkerExited",
    "WorkerLaunchFailed",
    "WorkerLaunchRequested",
    "WorkerLaunched",
    "WorkerRegistered",
    "WorkerRelaunched",
    "WorkerStopRequested",
    "WorkerStopped",
    "WorktreeCreated",
    "WorktreeFailed",
    "WorktreePrepared",
    "WorktreeRemovalFailed",
    "WorktreeRemovalRequested",
    "WorktreeRemoved",
    "WorktreeRequested",
    "event_class",
]

EVENT_TYPES: dict[str, type[Event]] = {
    cls.type_name(): cls
    for cls in (
        LedgerCreated,
        LedgerCreatedV2,
        RunOpened,
        RunBasePinRequested,
        RunBasePinned,
        RunBasePinFailed,
        IntentOutcomeUnknown,
        IntentOutcomeUnknownV2,
        IntentCancelled,
        RunPaused,
        RunResumed,
        RunAborted,
        RunCompleted,
        RunSupervised,
        RunUnsupervised,
        TaskPlanned,
        TaskPlannedV2,
        WorktreeRequested,
        WorktreeCreated,
        WorktreeFailed,
        WorktreePrepared,
        WorktreeRemovalRequested,
        WorktreeRemoved,
        WorktreeRemovalFailed,
        WorkerRegistered,
        WorkerRelaunched,
        WorkerLaunchRequested,
        WorkerLaunched,
        WorkerLaunchFailed,
        WorkerStopRequested,
        WorkerStopped,
        WorkerExited,
        WorkerActionRefused,
        LeaseGranted,
        LeaseRenewed,
        LeaseReleased,
        LeaseExpired,
        CandidatePinRequested,
        CandidatePinned,
        CandidateDiverged,
        CandidateUnstable,
        CandidateReleaseRequested,
        CandidateReleased,
        CandidateReleaseFailed,
        CheckRequested,
        ExecutionRequested,
        ExecutionCreated,
        ExecutionFailed,
        CheckLaunchRequested,
        CheckLaunched,
        CheckLaunchFailed,
        CheckPassed,
        CheckFailed,
        CheckTimedOut,
        ExecutionRemovalRequested,
        ExecutionRemoved,
    )
}


def event_class(type_name: str) -> type[Event]:
    try:
        return EVENT_TYPES[type_name]
    except KeyError:
        raise KeyError(f"unknown event type {type_name!r}") from None
