"""The effect protocol's pure rules: what resolves an intent, and when an unknown is recorded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from docket.domain import events as ev
from docket.domain import run
from docket.domain.effects import (
    BACKOFF_MAX_MS,
    INTENT_TYPES,
    OUTCOME_TYPES,
    UNKNOWN_TYPES,
    backoff_ms,
    is_resolved,
    last_unknown,
    record_unknown,
)
from docket.domain.kernel.values import to_ms

from .builders import T0, at


def test_roles_come_from_the_event_classes():
    assert set(INTENT_TYPES) == {"RunBasePinRequested.v1", "WorktreeRequested.v1", "WorkerLaunchRequested.v1",
                                 "WorkerStopRequested.v1", "CandidatePinRequested.v1", "CandidateReleaseRequested.v1",
                                 "ExecutionRequested.v1", "CheckLaunchRequested.v1", "ExecutionRemovalRequested.v1",
                                 "WorktreeRemovalRequested.v1", "IntegrationStepRequested.v1",
                                 "IntegrationTargetRequested.v1", "IntegrationTargetRequested.v2",
                                 "HookRequested.v1", "RunBasePinRequested.v2", "CandidatePinRequested.v2",
                                 "IntegrationTargetRequested.v3", "WorktreeRequested.v2", "IntegrationStepRequested.v2",
                                     "ExecutionRequested.v2"}
    assert set(OUTCOME_TYPES) == {"RunBasePinned.v1", "RunBasePinFailed.v1", "IntentCancelled.v1",
                                  "WorktreeCreated.v1", "WorktreeFailed.v1", "WorkerLaunched.v1",
                                  "WorkerLaunchFailed.v1", "WorkerStopped.v1", "CandidatePinned.v1",
                                  "CandidateDiverged.v1", "CandidateReleased.v1", "CandidateReleaseFailed.v1",
                                  "ExecutionCreated.v1", "ExecutionFailed.v1", "CheckLaunched.v1",
                                  "CheckLaunchFailed.v1", "ExecutionRemoved.v1", "WorktreeRemoved.v1",
                                  "WorktreeRemovalFailed.v1", "IntegrationStepMerged.v1", "IntegrationStepFailed.v1",
                                  "IntegrationCompleted.v1", "IntegrationTargetMoved.v1", "HookFinished.v1"}
    assert set(UNKNOWN_TYPES) == {"IntentOutcomeUnknown.v1", "IntentOutcomeUnknown.v2"}
    for name in (*INTENT_TYPES, *OUTCOME_TYPES, *UNKNOWN_TYPES):
        assert "intent_id" in ev.EVENT_TYPES[name].model_fields, name


def _history():
    opened, intent = run.open_run("r1", "i1", "g", "main", None, "/r", T0)
    return [(2, opened), (3, intent)]


def test_an_intent_is_resolved_by_an_outcome_naming_it_and_not_by_an_unknown():
    history = _history()
    assert not is_resolved(history, "i1")
    unknown = record_unknown("run:r1", 2, "i1", "disk gone", None, T0)
    history.append((4, unknown))
    assert not is_resolved(history, "i1") and last_unknown(history, "i1") == unknown
    cancelled = ev.IntentCancelled(stream="run:r1", version=4, recorded_at=T0, intent_id="i1", reason="aborted")
    assert is_resolved(history + [(5, cancelled)], "i1")
    assert not is_resolved(history + [(5, cancelled)], "i2")


def test_a_new_reason_is_recorded_at_once_and_the_same_reason_only_after_its_back_off():
    first = record_unknown("run:r1", 2, "i1", "disk gone", None, T0)
    assert first.observations == 1 and first.retry_at == at(1_000)
    assert record_unknown("run:r1", 3, "i1", "disk gone", first, at(999)) is None  # inside the back-off: nothing
    second = record_unknown("run:r1", 3, "i1", "disk gone", first, at(1_000))
    assert second.observations == 2 and second.retry_at == at(3_000)  # the back-off doubles
    changed = record_unknown("run:r1", 3, "i1", "repository moved", first, at(10))
    assert changed.observations == 1 and changed.reason == "repository moved"  # a change is recorded at once


def test_a_legacy_unknown_without_retry_at_is_followed_by_a_counted_one():
    legacy = ev.IntentOutcomeUnknown(stream="run:r1", version=3, recorded_at=T0, intent_id="i1", reason="x")
    assert record_unknown("run:r1", 3, "i1", "x", legacy, T0).observations == 2


@given(st.integers(min_value=1, max_value=10**9))
def test_back_off_grows_and_is_capped(n):
    assert 1_000 <= backoff_ms(n) <= BACKOFF_MAX_MS
    assert backoff_ms(n + 1) >= backoff_ms(n)


def test_a_stuck_intent_is_recorded_a_logarithmic_number_of_times():
    """Observed every second for a day, the same unknown is recorded at most ~40 times, not 86,400."""
    last, records = None, 0
    for second in range(86_400):
        event = record_unknown("run:r1", 2 + records, "i1", "disk gone", last, at(second * 1_000))
        if event is not None:
            last, records = event, records + 1
    assert 10 < records < 40
    assert to_ms(last.retry_at) - to_ms(last.recorded_at) == BACKOFF_MAX_MS
