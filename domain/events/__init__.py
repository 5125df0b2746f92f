"""Every event docket records: frozen pydantic models with fixed stored names.

One module per aggregate (``ledger``, ``run``, ``task``, ``worker``, ``request``, ``lease``, ``candidate`` with
``handoff``, ``integration``, ``hooks``),
one for the effect protocol's own events (``effect``), and the envelope and
field types they share (``base``). The catalogue is built here, in the order
``docs/events.md`` lists it.

Each class declares its ``effect_role`` in the effect protocol: intents (named
``...Requested``) ask for an effect; outcomes carry the ``intent_id`` they
resolve; an "unknown" observation leaves its intent pending.

The submodules are imported on first use (PEP 562): a command that meets three event types builds only their
modules (``docket task plan`` meets the run's and the task's), and ``EVENT_TYPES``, the whole catalogue, is built
when something asks for it. ``tests/unit/test_event_catalogue.py`` checks the tables below against the modules.
Every model defers its validator to first use (``defer_build``), and the event modules have no
``from __future__ import annotations``: pydantic would evaluate each string annotation again when it builds the class.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Event

# Each submodule and the names it gives the catalogue's users.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "base": (
        "Event", "ProcessIdentity",
    ),
    "handoff": (
        "CheckBinding", "HandoffConfirmed", "HandoffOffered", "HandoffRejected",
    ),
    "hooks": (
        "HookFinished", "HookRequested",
    ),
    "request": (
        "AnswerDelivered", "AnswerRefused", "FollowUpDecided", "FollowUpProposed", "ProgressReported", "QuestionAnswered", "QuestionAsked", "QuestionExpired",
        "RequestRefused", "WorkFinished",
    ),
    "integration": (
        "ApprovalRecorded", "ApprovedCandidate", "IntegrationCompleted", "IntegrationPrepared",
        "IntegrationPreparedV2", "IntegrationQueueClosed", "IntegrationStep", "IntegrationStepConflicted",
        "IntegrationStepFailed", "IntegrationStepMerged", "IntegrationStepQueued", "IntegrationStepRejected",
        "IntegrationStepRequested", "IntegrationStepRequestedV2", "IntegrationStepVerified", "IntegrationTargetMoved",
        "IntegrationTargetRequested", "IntegrationTargetRequestedV2", "IntegrationTargetRequestedV3",
        "PathOverlapWarning", "ReceiptSealed",
        "IntegrationTargetMovedByOthers", "IntegrationRequeued", "IntegrationBatchVerified",
        "IntegrationBatchFailed", "IntegrationBatchRequeued", "RequiredCheck",
    ),
    "candidate": (
        "ArtifactRecord", "CandidateDiverged", "CandidatePinRequested", "CandidatePinRequestedV2", "CandidatePinned", "CandidateReleaseFailed",
        "CandidateReleaseRequested", "CandidateReleased", "CandidateUnstable", "CheckFailed", "CheckLaunchFailed",
        "CheckLaunchRequested", "CheckLaunched", "CheckPassed", "CheckRequested", "CheckTestsReported",
        "CheckTimedOut", "ExecutionCreated", "ExecutionFailed", "ExecutionRemovalRequested", "ExecutionRemoved",
        "ExecutionRequested", "ExecutionRequestedV2", "TestFailureRecord",
    ),
    "effect": (
        "IntentCancelled", "IntentOutcomeUnknown", "IntentOutcomeUnknownV2",
    ),
    "lease": (
        "LeaseExpired", "LeaseGranted", "LeaseReleased", "LeaseRenewed",
    ),
    "ledger": (
        "LedgerCreated", "LedgerCreatedV2",
    ),
    "run": (
        "RunAborted", "RunBasePinFailed", "RunBasePinRequested", "RunBasePinRequestedV2", "RunBasePinned", "RunBudgetExhausted",
        "RunCompleted", "RunConfigurationRecorded", "RunOpened", "RunOpenedV2", "RunPaused", "RunPlanned", "RunPlannedV2", "ExportKey",
        "PlannedTask",
        "RunResumed", "RunSupervised", "RunTaskAdded", "RunUnsupervised", "RunUsageExhausted", "RunWaiting",
    ),
    "worker": (
        "AgentReported", "EgressRefusal", "EgressRefused", "WorkerActionRefused", "WorkerExited", "WorkerLaunchFailed",
        "WorkerLaunchRequested", "WorkerLaunched", "WorkerLost", "WorkerRegistered", "WorkerRelaunched", "WorkerStopRequested",
        "WorkerStopped",
    ),
    "task": (
        "TaskAnswered", "TaskFeedbackRecorded", "TaskFinished", "TaskPlanned", "TaskPlannedV2", "WorktreeCreated", "WorktreeFailed",
        "WorktreeLost", "WorktreePrepared", "WorktreeRemovalFailed", "WorktreeRemovalRequested", "WorktreeRemoved",
        "WorktreeRequested", "WorktreeRequestedV2",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

# Every event class, in the order docs/events.md lists them.
_CATALOGUE: tuple[str, ...] = (
    "LedgerCreated", "LedgerCreatedV2", "RunOpened", "RunOpenedV2", "RunBasePinRequested", "RunBasePinRequestedV2",
    "RunBasePinned",
    "RunBasePinFailed", "IntentOutcomeUnknown", "IntentOutcomeUnknownV2", "IntentCancelled", "RunPaused", "RunResumed", "RunAborted",
    "RunCompleted", "RunSupervised", "RunUnsupervised", "RunWaiting", "RunPlanned", "RunPlannedV2",
    "RunTaskAdded", "RunConfigurationRecorded", "RunBudgetExhausted", "RunUsageExhausted", "TaskPlanned", "TaskPlannedV2", "WorktreeRequested", "WorktreeRequestedV2",
    "WorktreeCreated",
    "WorktreeFailed", "WorktreeLost", "WorktreePrepared", "WorktreeRemovalRequested", "WorktreeRemoved", "WorktreeRemovalFailed",
    "TaskFeedbackRecorded", "TaskAnswered", "TaskFinished", "WorkerRegistered", "WorkerRelaunched", "WorkerLaunchRequested",
    "WorkerLaunched", "WorkerLaunchFailed", "WorkerStopRequested", "WorkerStopped", "WorkerExited", "WorkerLost", "AgentReported",
    "EgressRefused", "WorkerActionRefused", "QuestionAsked", "QuestionAnswered", "AnswerDelivered", "AnswerRefused", "QuestionExpired",
    "ProgressReported", "FollowUpProposed", "FollowUpDecided", "WorkFinished", "RequestRefused", "LeaseGranted", "LeaseRenewed", "LeaseReleased", "LeaseExpired", "CandidatePinRequested",
    "CandidatePinRequestedV2", "CandidatePinned", "CandidateDiverged", "CandidateUnstable", "CandidateReleaseRequested", "CandidateReleased",
    "CandidateReleaseFailed", "CheckRequested", "ExecutionRequested", "ExecutionRequestedV2", "ExecutionCreated", "ExecutionFailed",
    "CheckLaunchRequested", "CheckLaunched", "CheckLaunchFailed", "CheckTestsReported", "CheckPassed", "CheckFailed",
    "CheckTimedOut", "ExecutionRemovalRequested", "ExecutionRemoved", "HandoffOffered", "HandoffConfirmed",
    "HandoffRejected", "ApprovalRecorded", "IntegrationPrepared", "IntegrationPreparedV2", "IntegrationStepQueued",
    "IntegrationQueueClosed", "IntegrationStepRequested", "IntegrationStepRequestedV2", "IntegrationStepMerged", "IntegrationStepFailed",
    "IntegrationStepConflicted", "IntegrationStepVerified", "IntegrationStepRejected", "IntegrationTargetRequested",
    "IntegrationTargetRequestedV2", "IntegrationTargetRequestedV3", "IntegrationCompleted", "IntegrationTargetMoved",
    "IntegrationTargetMovedByOthers", "IntegrationRequeued", "IntegrationBatchVerified", "IntegrationBatchFailed",
    "IntegrationBatchRequeued", "ReceiptSealed", "HookRequested", "HookFinished",
)

# Each event class's role in the effect protocol (its ``effect_role``; every other class is a fact), so the intents
# view tells an intent from its outcome without importing a class (status catching up its views imports none).
_ROLES: dict[str, tuple[str, ...]] = {
    "intent": (
        "RunBasePinRequested", "RunBasePinRequestedV2", "WorktreeRequested", "WorktreeRequestedV2",
        "WorktreeRemovalRequested", "WorkerLaunchRequested",
        "WorkerStopRequested", "CandidatePinRequested", "CandidatePinRequestedV2", "CandidateReleaseRequested", "ExecutionRequested",
        "ExecutionRequestedV2",
        "CheckLaunchRequested", "ExecutionRemovalRequested", "IntegrationStepRequested", "IntegrationStepRequestedV2",
        "IntegrationTargetRequested",
        "IntegrationTargetRequestedV2", "IntegrationTargetRequestedV3", "HookRequested",
    ),
    "outcome": (
        "RunBasePinned", "RunBasePinFailed", "IntentCancelled", "WorktreeCreated", "WorktreeFailed", "WorktreeRemoved",
        "WorktreeRemovalFailed", "WorkerLaunched", "WorkerLaunchFailed", "WorkerStopped", "CandidatePinned",
        "CandidateDiverged", "CandidateReleased", "CandidateReleaseFailed", "ExecutionCreated", "ExecutionFailed",
        "CheckLaunched", "CheckLaunchFailed", "ExecutionRemoved", "IntegrationStepMerged", "IntegrationStepFailed",
        "IntegrationCompleted", "IntegrationTargetMoved", "HookFinished",
    ),
    "unknown": ("IntentOutcomeUnknown", "IntentOutcomeUnknownV2"),
}

__all__ = ["EVENT_TYPES", "event_class", "role_of", "stored", *_MODULE_OF]


def __getattr__(name: str) -> Any:
    if name == "EVENT_TYPES":
        catalogue = {cls.type_name(): cls for cls in (__getattr__(n) for n in _CATALOGUE)}
        globals()["EVENT_TYPES"] = catalogue
        return catalogue
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{module}", fromlist=[name]), name)  # one of this package's modules
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def _stored_name(class_name: str) -> str:
    """The ``name`` part of a class's stored type: LedgerCreatedV2 -> LedgerCreated."""
    return re.sub(r"V\d+$", "", class_name)


class _StoredNames:
    """``stored.RunOpened == "RunOpened.v1"``: an event class's stored type name (``type_name()``) without importing
    its module, for tables keyed by type (the views' handlers). The class's name says its version: XV2 is X.v2."""

    def __getattr__(self, class_name: str) -> str:
        if class_name not in _CATALOGUE:
            raise AttributeError(f"{class_name!r} is not an event class")
        match = re.fullmatch(r"(.*?)(?:V(\d+))?", class_name)
        assert match is not None
        return f"{match[1]}.v{match[2] or 1}"


stored = _StoredNames()

_CLASSES_NAMED: dict[str, tuple[str, ...]] = {}
for _class in _CATALOGUE:
    _CLASSES_NAMED[_stored_name(_class)] = (*_CLASSES_NAMED.get(_stored_name(_class), ()), _class)
del _class


def event_class(type_name: str) -> type[Event]:
    """The class stored as type_name ("TaskPlanned.v2"), importing only its module; KeyError for an unknown one."""
    for class_name in _CLASSES_NAMED.get(type_name.rsplit(".v", 1)[0], ()):
        cls = __getattr__(class_name)
        if cls.type_name() == type_name:
            return cls
    raise KeyError(f"unknown event type {type_name!r}")


def role_of(type_name: str) -> str | None:
    """The stored type's role in the effect protocol ("intent", "outcome", "unknown", "fact"), importing nothing;
    None for a type no class has."""
    if not _ROLE_OF_STORED:
        _ROLE_OF_STORED.update({getattr(stored, name): role for role, names in _ROLES.items() for name in names})
        _ROLE_OF_STORED.update({getattr(stored, name): "fact" for name in _CATALOGUE
                                if getattr(stored, name) not in _ROLE_OF_STORED})
    return _ROLE_OF_STORED.get(type_name)


_ROLE_OF_STORED: dict[str, str] = {}
