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
when something asks for it. One table, ``_REGISTRY``, names each of them with its module and its role;
``tests/unit/test_event_registry.py`` keeps it in step with the modules (read with ``ast``), and the imports a type
checker reads (under ``TYPE_CHECKING``, generated from the table) in step with it.
Every model defers its validator to first use (``defer_build``), and the event modules have no
``from __future__ import annotations``: pydantic would evaluate each string annotation again when it builds the class.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, cast

Role = Literal["intent", "outcome", "unknown", "fact"]

# Every name the package gives its users: its module, and for an event class its role in the effect protocol (its
# ``effect_role``: "intent", "outcome", "unknown", or "fact"), so the intents view tells an intent from its outcome
# without importing a class (status catching up its views imports none); None for a name that is no event class.
# The event classes come in the order docs/events.md lists them.
_REGISTRY: dict[str, tuple[str, Role | None]] = {
    "LedgerCreated": ("ledger", "fact"),
    "LedgerCreatedV2": ("ledger", "fact"),
    "RunOpened": ("run", "fact"),
    "RunOpenedV2": ("run", "fact"),
    "RunBasePinRequested": ("run", "intent"),
    "RunBasePinRequestedV2": ("run", "intent"),
    "RunBasePinned": ("run", "outcome"),
    "RunBasePinFailed": ("run", "outcome"),
    "IntentOutcomeUnknown": ("effect", "unknown"),
    "IntentOutcomeUnknownV2": ("effect", "unknown"),
    "IntentCancelled": ("effect", "outcome"),
    "RunPaused": ("run", "fact"),
    "RunResumed": ("run", "fact"),
    "RunAborted": ("run", "fact"),
    "RunCompleted": ("run", "fact"),
    "RunSupervised": ("run", "fact"),
    "RunUnsupervised": ("run", "fact"),
    "RunWaiting": ("run", "fact"),
    "RunPlanned": ("run", "fact"),
    "RunPlannedV2": ("run", "fact"),
    "RunTaskAdded": ("run", "fact"),
    "RunConfigurationRecorded": ("run", "fact"),
    "RunBudgetExhausted": ("run", "fact"),
    "RunUsageExhausted": ("run", "fact"),
    "TaskPlanned": ("task", "fact"),
    "TaskPlannedV2": ("task", "fact"),
    "WorktreeRequested": ("task", "intent"),
    "WorktreeRequestedV2": ("task", "intent"),
    "WorktreeCreated": ("task", "outcome"),
    "WorktreeFailed": ("task", "outcome"),
    "WorktreeLost": ("task", "fact"),
    "WorktreePrepared": ("task", "fact"),
    "WorktreeRemovalRequested": ("task", "intent"),
    "WorktreeRemoved": ("task", "outcome"),
    "WorktreeRemovalFailed": ("task", "outcome"),
    "TaskFeedbackRecorded": ("task", "fact"),
    "TaskAnswered": ("task", "fact"),
    "TaskFinished": ("task", "fact"),
    "WorkerRegistered": ("worker", "fact"),
    "WorkerRelaunched": ("worker", "fact"),
    "WorkerLaunchRequested": ("worker", "intent"),
    "WorkerLaunched": ("worker", "outcome"),
    "WorkerLaunchFailed": ("worker", "outcome"),
    "WorkerStopRequested": ("worker", "intent"),
    "WorkerStopped": ("worker", "outcome"),
    "WorkerExited": ("worker", "fact"),
    "WorkerLost": ("worker", "fact"),
    "AgentReported": ("worker", "fact"),
    "EgressRefused": ("worker", "fact"),
    "WorkerActionRefused": ("worker", "fact"),
    "QuestionAsked": ("request", "fact"),
    "QuestionAnswered": ("request", "fact"),
    "AnswerDelivered": ("request", "fact"),
    "AnswerRefused": ("request", "fact"),
    "QuestionExpired": ("request", "fact"),
    "ProgressReported": ("request", "fact"),
    "FollowUpProposed": ("request", "fact"),
    "FollowUpDecided": ("request", "fact"),
    "WorkFinished": ("request", "fact"),
    "RequestRefused": ("request", "fact"),
    "LeaseGranted": ("lease", "fact"),
    "LeaseRenewed": ("lease", "fact"),
    "LeaseReleased": ("lease", "fact"),
    "LeaseExpired": ("lease", "fact"),
    "CandidatePinRequested": ("candidate", "intent"),
    "CandidatePinRequestedV2": ("candidate", "intent"),
    "CandidatePinned": ("candidate", "outcome"),
    "CandidateDiverged": ("candidate", "outcome"),
    "CandidateUnstable": ("candidate", "fact"),
    "CandidateReleaseRequested": ("candidate", "intent"),
    "CandidateReleased": ("candidate", "outcome"),
    "CandidateReleaseFailed": ("candidate", "outcome"),
    "CheckRequested": ("candidate", "fact"),
    "ExecutionRequested": ("candidate", "intent"),
    "ExecutionRequestedV2": ("candidate", "intent"),
    "ExecutionCreated": ("candidate", "outcome"),
    "ExecutionFailed": ("candidate", "outcome"),
    "CheckLaunchRequested": ("candidate", "intent"),
    "CheckLaunched": ("candidate", "outcome"),
    "CheckLaunchFailed": ("candidate", "outcome"),
    "CheckTestsReported": ("candidate", "fact"),
    "CheckPassed": ("candidate", "fact"),
    "CheckFailed": ("candidate", "fact"),
    "CheckTimedOut": ("candidate", "fact"),
    "ExecutionRemovalRequested": ("candidate", "intent"),
    "ExecutionRemoved": ("candidate", "outcome"),
    "HandoffOffered": ("handoff", "fact"),
    "HandoffConfirmed": ("handoff", "fact"),
    "HandoffRejected": ("handoff", "fact"),
    "ApprovalRecorded": ("integration", "fact"),
    "IntegrationPrepared": ("integration", "fact"),
    "IntegrationPreparedV2": ("integration", "fact"),
    "IntegrationStepQueued": ("integration", "fact"),
    "IntegrationQueueClosed": ("integration", "fact"),
    "IntegrationStepRequested": ("integration", "intent"),
    "IntegrationStepRequestedV2": ("integration", "intent"),
    "IntegrationStepMerged": ("integration", "outcome"),
    "IntegrationStepFailed": ("integration", "outcome"),
    "IntegrationStepConflicted": ("integration", "fact"),
    "IntegrationStepVerified": ("integration", "fact"),
    "IntegrationStepRejected": ("integration", "fact"),
    "IntegrationTargetRequested": ("integration", "intent"),
    "IntegrationTargetRequestedV2": ("integration", "intent"),
    "IntegrationTargetRequestedV3": ("integration", "intent"),
    "IntegrationCompleted": ("integration", "outcome"),
    "IntegrationTargetMoved": ("integration", "outcome"),
    "IntegrationTargetMovedByOthers": ("integration", "fact"),
    "IntegrationRequeued": ("integration", "fact"),
    "IntegrationBatchVerified": ("integration", "fact"),
    "IntegrationBatchFailed": ("integration", "fact"),
    "IntegrationBatchRequeued": ("integration", "fact"),
    "IntegrationVerificationStarted": ("integration", "fact"),
    "IntegrationVerificationCancelled": ("integration", "fact"),
    "ReceiptSealed": ("integration", "fact"),
    "HookRequested": ("hooks", "intent"),
    "HookFinished": ("hooks", "outcome"),
    # the models the events are made of, and their envelope: no event classes
    "Event": ("base", None),
    "ProcessIdentity": ("base", None),
    "ArtifactRecord": ("candidate", None),
    "TestFailureRecord": ("candidate", None),
    "CheckBinding": ("handoff", None),
    "ApprovedCandidate": ("integration", None),
    "IntegrationStep": ("integration", None),
    "PathOverlapWarning": ("integration", None),
    "RequiredCheck": ("integration", None),
    "ExportKey": ("run", None),
    "PlannedTask": ("run", None),
    "EgressRefusal": ("worker", None),
}

# Derived from the table: each module's names, and every event class in the catalogue's order.
_MODULE_OF: dict[str, str] = {name: module for name, (module, _role) in _REGISTRY.items()}
_EXPORTS: dict[str, tuple[str, ...]] = {}
for _name, (_module, _role) in _REGISTRY.items():
    _EXPORTS[_module] = (*_EXPORTS.get(_module, ()), _name)
del _name, _module, _role
_CATALOGUE: tuple[str, ...] = tuple(name for name, (_module, role) in _REGISTRY.items() if role is not None)

# TYPE_CHECKING-IMPORTS (generated from _REGISTRY by `python -m tests.unit.test_event_registry --write`; do not edit)
if TYPE_CHECKING:
    from .base import (
        Event as Event,
        ProcessIdentity as ProcessIdentity,
    )
    from .candidate import (
        ArtifactRecord as ArtifactRecord,
        CandidateDiverged as CandidateDiverged,
        CandidatePinRequested as CandidatePinRequested,
        CandidatePinRequestedV2 as CandidatePinRequestedV2,
        CandidatePinned as CandidatePinned,
        CandidateReleaseFailed as CandidateReleaseFailed,
        CandidateReleaseRequested as CandidateReleaseRequested,
        CandidateReleased as CandidateReleased,
        CandidateUnstable as CandidateUnstable,
        CheckFailed as CheckFailed,
        CheckLaunchFailed as CheckLaunchFailed,
        CheckLaunchRequested as CheckLaunchRequested,
        CheckLaunched as CheckLaunched,
        CheckPassed as CheckPassed,
        CheckRequested as CheckRequested,
        CheckTestsReported as CheckTestsReported,
        CheckTimedOut as CheckTimedOut,
        ExecutionCreated as ExecutionCreated,
        ExecutionFailed as ExecutionFailed,
        ExecutionRemovalRequested as ExecutionRemovalRequested,
        ExecutionRemoved as ExecutionRemoved,
        ExecutionRequested as ExecutionRequested,
        ExecutionRequestedV2 as ExecutionRequestedV2,
        TestFailureRecord as TestFailureRecord,
    )
    from .effect import (
        IntentCancelled as IntentCancelled,
        IntentOutcomeUnknown as IntentOutcomeUnknown,
        IntentOutcomeUnknownV2 as IntentOutcomeUnknownV2,
    )
    from .handoff import (
        CheckBinding as CheckBinding,
        HandoffConfirmed as HandoffConfirmed,
        HandoffOffered as HandoffOffered,
        HandoffRejected as HandoffRejected,
    )
    from .hooks import (
        HookFinished as HookFinished,
        HookRequested as HookRequested,
    )
    from .integration import (
        ApprovalRecorded as ApprovalRecorded,
        ApprovedCandidate as ApprovedCandidate,
        IntegrationBatchFailed as IntegrationBatchFailed,
        IntegrationBatchRequeued as IntegrationBatchRequeued,
        IntegrationBatchVerified as IntegrationBatchVerified,
        IntegrationCompleted as IntegrationCompleted,
        IntegrationPrepared as IntegrationPrepared,
        IntegrationPreparedV2 as IntegrationPreparedV2,
        IntegrationQueueClosed as IntegrationQueueClosed,
        IntegrationRequeued as IntegrationRequeued,
        IntegrationStep as IntegrationStep,
        IntegrationStepConflicted as IntegrationStepConflicted,
        IntegrationStepFailed as IntegrationStepFailed,
        IntegrationStepMerged as IntegrationStepMerged,
        IntegrationStepQueued as IntegrationStepQueued,
        IntegrationStepRejected as IntegrationStepRejected,
        IntegrationStepRequested as IntegrationStepRequested,
        IntegrationStepRequestedV2 as IntegrationStepRequestedV2,
        IntegrationStepVerified as IntegrationStepVerified,
        IntegrationTargetMoved as IntegrationTargetMoved,
        IntegrationTargetMovedByOthers as IntegrationTargetMovedByOthers,
        IntegrationTargetRequested as IntegrationTargetRequested,
        IntegrationTargetRequestedV2 as IntegrationTargetRequestedV2,
        IntegrationTargetRequestedV3 as IntegrationTargetRequestedV3,
        IntegrationVerificationCancelled as IntegrationVerificationCancelled,
        IntegrationVerificationStarted as IntegrationVerificationStarted,
        PathOverlapWarning as PathOverlapWarning,
        ReceiptSealed as ReceiptSealed,
        RequiredCheck as RequiredCheck,
    )
    from .lease import (
        LeaseExpired as LeaseExpired,
        LeaseGranted as LeaseGranted,
        LeaseReleased as LeaseReleased,
        LeaseRenewed as LeaseRenewed,
    )
    from .ledger import (
        LedgerCreated as LedgerCreated,
        LedgerCreatedV2 as LedgerCreatedV2,
    )
    from .request import (
        AnswerDelivered as AnswerDelivered,
        AnswerRefused as AnswerRefused,
        FollowUpDecided as FollowUpDecided,
        FollowUpProposed as FollowUpProposed,
        ProgressReported as ProgressReported,
        QuestionAnswered as QuestionAnswered,
        QuestionAsked as QuestionAsked,
        QuestionExpired as QuestionExpired,
        RequestRefused as RequestRefused,
        WorkFinished as WorkFinished,
    )
    from .run import (
        ExportKey as ExportKey,
        PlannedTask as PlannedTask,
        RunAborted as RunAborted,
        RunBasePinFailed as RunBasePinFailed,
        RunBasePinRequested as RunBasePinRequested,
        RunBasePinRequestedV2 as RunBasePinRequestedV2,
        RunBasePinned as RunBasePinned,
        RunBudgetExhausted as RunBudgetExhausted,
        RunCompleted as RunCompleted,
        RunConfigurationRecorded as RunConfigurationRecorded,
        RunOpened as RunOpened,
        RunOpenedV2 as RunOpenedV2,
        RunPaused as RunPaused,
        RunPlanned as RunPlanned,
        RunPlannedV2 as RunPlannedV2,
        RunResumed as RunResumed,
        RunSupervised as RunSupervised,
        RunTaskAdded as RunTaskAdded,
        RunUnsupervised as RunUnsupervised,
        RunUsageExhausted as RunUsageExhausted,
        RunWaiting as RunWaiting,
    )
    from .task import (
        TaskAnswered as TaskAnswered,
        TaskFeedbackRecorded as TaskFeedbackRecorded,
        TaskFinished as TaskFinished,
        TaskPlanned as TaskPlanned,
        TaskPlannedV2 as TaskPlannedV2,
        WorktreeCreated as WorktreeCreated,
        WorktreeFailed as WorktreeFailed,
        WorktreeLost as WorktreeLost,
        WorktreePrepared as WorktreePrepared,
        WorktreeRemovalFailed as WorktreeRemovalFailed,
        WorktreeRemovalRequested as WorktreeRemovalRequested,
        WorktreeRemoved as WorktreeRemoved,
        WorktreeRequested as WorktreeRequested,
        WorktreeRequestedV2 as WorktreeRequestedV2,
    )
    from .worker import (
        AgentReported as AgentReported,
        EgressRefusal as EgressRefusal,
        EgressRefused as EgressRefused,
        WorkerActionRefused as WorkerActionRefused,
        WorkerExited as WorkerExited,
        WorkerLaunchFailed as WorkerLaunchFailed,
        WorkerLaunchRequested as WorkerLaunchRequested,
        WorkerLaunched as WorkerLaunched,
        WorkerLost as WorkerLost,
        WorkerRegistered as WorkerRegistered,
        WorkerRelaunched as WorkerRelaunched,
        WorkerStopRequested as WorkerStopRequested,
        WorkerStopped as WorkerStopped,
    )
# TYPE_CHECKING-IMPORTS END

__all__ = ["EVENT_TYPES", "event_class", "role_of", "stored", *_MODULE_OF]

if TYPE_CHECKING:
    EVENT_TYPES: dict[str, type[Event]]  # built on first use: every event class by its stored type name


def _load(name: str) -> object:
    """The package's attribute name, its module imported on first use (PEP 562)."""
    if name == "EVENT_TYPES":
        catalogue = {cls.type_name(): cls for cls in (_event_class_named(n) for n in _CATALOGUE)}
        globals()["EVENT_TYPES"] = catalogue
        return catalogue
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{module}", fromlist=[name]), name)  # one of this package's modules
    globals()[name] = value
    return value


if not TYPE_CHECKING:  # a type checker reads the imports above instead, and is told of no other names
    __getattr__ = _load


def _event_class_named(class_name: str) -> type[Event]:
    return cast("type[Event]", _load(class_name))


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
        cls = _event_class_named(class_name)
        if cls.type_name() == type_name:
            return cls
    raise KeyError(f"unknown event type {type_name!r}")


def role_of(type_name: str) -> str | None:
    """The stored type's role in the effect protocol ("intent", "outcome", "unknown", "fact"), importing nothing;
    None for a type no class has."""
    if not _ROLE_OF_STORED:
        _ROLE_OF_STORED.update({getattr(stored, name): role for name, (_module, role) in _REGISTRY.items()
                                if role is not None})
    return _ROLE_OF_STORED.get(type_name)


_ROLE_OF_STORED: dict[str, str] = {}
