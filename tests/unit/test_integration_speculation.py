"""[integration] speculate (domain/merge_queue/speculation.py): ranges of merged steps checked at once, each on the
merge of everything ahead of it; verdicts in queue order; what a failure ahead cancels; what lands when."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from docket.domain import events as ev
from docket.domain.merge_queue import integration
from docket.domain.merge_queue import speculation as rules
from docket.domain.merge_queue.speculation import Range

from .builders import T0
from .test_integration_aggregate import HEAD, fold, rolling
from .test_integration_batch import _merge, both, merge_commit


def binding(first: int, last: int, merge: str) -> str:
    return hashlib.sha256(f"{first}-{last}-{merge}".encode()).hexdigest()


@dataclass
class Queue:
    """A queue driven as the service layer drives it, with check runs that end in the order a test chooses."""

    state: integration.Integration
    batch: int
    speculate: int
    fails: Callable[[frozenset[str]], bool]
    holds: dict[str, frozenset[str]] = field(default_factory=lambda: {HEAD: frozenset()})
    running: dict[str, bool] = field(default_factory=dict)  # binding -> its check ended
    runs: list[tuple[int, int, str]] = field(default_factory=list)  # every check run that ended: (first, last, result)
    started: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)  # (first, last, assumed)
    cancelled: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, because of)
    results: dict[str, bool] = field(default_factory=dict)  # binding -> failed

    def record(self, events: list[ev.Event]) -> None:
        self.state = fold(events, self.state)
        for e in events:
            if isinstance(e, ev.IntegrationVerificationStarted):
                self.started.append((e.first_step, e.last_step, tuple(e.assumed)))
            if isinstance(e, ev.IntegrationVerificationCancelled):
                self.cancelled.append((e.first_step, e.last_step, e.because_of))
                self.running.pop(e.verification_binding, None)

    def settle(self) -> bool:
        """Cancel, merge and start what the rules say now; whether anything was done."""
        cancelled = rules.cancel(self.state, T0)
        if cancelled:
            self.record(cancelled)
            return True
        if self.state.next_step() is None:
            return False
        window = rules.window(self.batch, self.speculate)
        following = next((s for s in self.state.steps if s.status == "waiting"), None)
        merged = self.state.open_batch()
        if following is not None and self.state.failing is None and (len(merged) < window) and (
                not merged or following.step > merged[-1].step):
            self.state = _merge(self.state, following.step, self.holds, size=window)
            return True
        ranges = rules.to_start(self.state, batch=self.batch, speculate=self.speculate)
        for scope in ranges:
            last = self.state.step(scope.last)
            assert last.merge_commit is not None
            made = binding(scope.first, scope.last, last.merge_commit)
            self.record(rules.start(self.state, scope, verification_binding=made, merge_commit=last.merge_commit,
                                    tree=last.merge_commit, now=T0))
            self.running[made] = False
            self.results.setdefault(made, self.fails(self.holds[last.merge_commit]))
        return bool(ranges)

    def end_one(self, latest_first: bool) -> bool:
        """One running check ends (the latest started, or the earliest); whether one did."""
        waiting = [b for v in self.state.running() if not self.running.get(b := v.binding_id, True)]
        if not waiting:
            return False
        chosen = waiting[-1] if latest_first else waiting[0]
        self.running[chosen] = True
        v = next(v for v in self.state.running() if v.binding_id == chosen)
        self.runs.append((v.first, v.last, "failed" if self.results[chosen] else "passed"))
        return True

    def verdict(self) -> bool:
        """The verdict of the range at the head, once its check ended; whether one was recorded."""
        probe = self.state.probe(self.batch)
        if not probe:
            return False
        head = self.state.running_at(probe[0].step)
        known = self.state.known_to_fail(probe)
        if head is None and known is not None:  # as the service layer: rejected on the failed batch's check
            binding_id, check, check_id, code = known
            self.record(integration.rejected(self.state, probe[0].step, verification_binding=binding_id, check=check,
                                             check_id=check_id, code=code, message="failed", now=T0))
            self.record(integration.requeue_after(self.state, probe[0].step, now=T0))
            return True
        if head is None or not self.running.get(head.binding_id):
            return False
        first, last = probe[0], probe[-1]
        assert last.merge_commit is not None
        failed = self.results[head.binding_id]
        common = dict(verification_binding=head.binding_id, tree=last.merge_commit, now=T0)
        if not failed and len(probe) > 1:
            self.record(integration.batch_verified(self.state, first.step, last.step, checks=[], **common))
        elif not failed:
            self.record(integration.verified(self.state, last.step, checks=[], **common))
        elif len(probe) > 1:
            self.record(integration.batch_failed(self.state, first.step, last.step, check="suite", check_id="c",
                                                 code="exit", message="failed", **common))
        else:
            self.record(integration.rejected(self.state, last.step, verification_binding=head.binding_id,
                                             check="suite", check_id="c", code="exit", message="failed", now=T0))
            self.record(integration.requeue_after(self.state, last.step, now=T0))
        return True

    def drive(self, latest_first: bool = False) -> Queue:
        for _ in range(10_000):
            if self.settle() or self.verdict():
                continue
            if not self.end_one(latest_first):
                return self
        raise AssertionError("the queue did not end")


def queue(steps: int, batch: int, speculate: int, fails: Callable[[frozenset[str]], bool]) -> Queue:
    return Queue(rolling(steps), batch, speculate, fails)


# --- which ranges start ----------------------------------------------------------------------------------------------


def merged(steps: int, count: int) -> integration.Integration:
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    state = rolling(steps)
    for n in range(1, count + 1):
        state = _merge(state, n, holds)
    return state


@pytest.mark.parametrize("count, batch, speculate, expected", [
    (0, 1, 4, []),  # nothing merged: nothing to check
    (3, 1, 4, [Range(1, 1), Range(2, 2), Range(3, 3)]),  # one range a step, each on the merges ahead
    (6, 1, 4, [Range(1, 1), Range(2, 2), Range(3, 3), Range(4, 4)]),  # at most speculate at once
    (6, 2, 2, [Range(1, 2), Range(3, 4)]),  # batches inside the speculation
    (5, 2, 4, [Range(1, 2), Range(3, 4), Range(5, 5)]),  # a last, smaller batch: it never waits to fill
    (4, 4, 1, [Range(1, 4)]),  # speculate 1: today's batch
])
def test_the_ranges_that_start(count, batch, speculate, expected):
    state = merged(8, count)
    assert rules.to_start(state, batch=batch, speculate=speculate) == expected


def test_a_step_that_finds_a_free_slot_is_checked_alone_and_what_piles_up_is_batched():
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    state = rolling(8)
    state = _merge(state, 1, holds)
    assert rules.to_start(state, batch=4, speculate=2) == [Range(1, 1)]  # a free slot: checked alone, at once
    state = fold(rules.start(state, Range(1, 1), verification_binding="1" * 64, merge_commit=merge_commit(1),
                             tree=merge_commit(1), now=T0), state)
    for n in (2, 3, 4):
        state = _merge(state, n, holds)
    assert rules.to_start(state, batch=4, speculate=2) == [Range(2, 4)]  # what piled up meanwhile: one batch


def test_ranges_start_after_those_running_and_only_up_to_speculate():
    q = queue(8, 1, 3, lambda tasks: False)
    for _ in range(8):
        q.settle()
    assert [(v.first, v.last) for v in q.state.running()] == [(1, 1), (2, 2), (3, 3)]
    assert q.started == [(1, 1, ()), (2, 2, (1,)), (3, 3, (1, 2))]  # each names the steps ahead it assumed
    assert rules.to_start(q.state, batch=1, speculate=3) == []
    assert q.state.open_batch()[-1].step == 3  # the window is full: nothing more is merged before a verdict


def test_a_range_is_started_once():
    q = queue(2, 1, 2, lambda tasks: False)
    for _ in range(4):
        q.settle()
    (v, _) = q.state.running()
    again = rules.start(q.state, Range(1, 1), verification_binding=v.binding_id, merge_commit=merge_commit(1),
                        tree=merge_commit(1), now=T0)
    other = rules.start(q.state, Range(1, 2), verification_binding="e" * 64, merge_commit=merge_commit(2),
                        tree=merge_commit(2), now=T0)
    assert again == [] and other == []  # the same one, or one overlapping a running one: nothing


# --- what a failure cancels, what lands when -------------------------------------------------------------------------


def test_a_failing_entry_in_the_middle_of_eight_with_speculation_four():
    q = queue(8, 1, 4, lambda tasks: "t3" in tasks).drive()
    state = q.state
    assert [s.task_id for s in state.steps if s.status == "rejected"] == ["t3"]
    assert sorted(s.task_id for s in state.steps if s.status == "verified") == [
        f"t{n}" for n in range(1, 9) if n != 3]
    # what was merged on top of step 3 (the window: three more) was cancelled and merged again; nothing ahead of it
    requeued = [s.step for s in state.steps if s.status == "requeued"]
    assert requeued == [4, 5, 6]
    assert sorted(q.cancelled) == [(4, 4, 3), (5, 5, 3), (6, 6, 3)]
    assert state.step(3).base == merge_commit(2)  # the failing one goes back to its task, from step 2's merge
    assert state.head() == state.steps[-1].merge_commit
    # never a range checked twice on one merge
    assert len(q.started) == len(set((f, last) for f, last, _ in q.started))


def test_a_result_that_comes_early_waits_for_the_ones_ahead_then_stands_without_a_check_again():
    q = queue(4, 1, 4, lambda tasks: False).drive(latest_first=True)
    assert q.runs == [(4, 4, "passed"), (3, 3, "passed"), (2, 2, "passed"), (1, 1, "passed")]
    assert [s.status for s in q.state.steps] == ["verified"] * 4
    assert q.cancelled == [] and len(q.started) == 4


def test_an_early_failure_behind_a_passing_head_rejects_only_its_own_step():
    q = queue(4, 1, 4, lambda tasks: "t4" in tasks).drive(latest_first=True)
    assert [s.status for s in q.state.steps] == ["verified", "verified", "verified", "rejected"]
    assert q.cancelled == []


def test_a_failure_ahead_cancels_a_passing_result_behind_it():
    # t1 breaks the check, and t2 happens to mend it: merged on top of t1, 2 and 3 pass
    q = queue(3, 1, 3, lambda tasks: "t1" in tasks and "t2" not in tasks).drive(latest_first=True)
    # 3 and 2 passed first, on merges holding t1: given up, checked again once t1 is dropped
    assert q.runs[:3] == [(3, 3, "passed"), (2, 2, "passed"), (1, 1, "failed")]
    assert sorted(q.cancelled) == [(2, 2, 1), (3, 3, 1)]
    assert [(s.task_id, s.status) for s in q.state.steps] == [
        ("t1", "rejected"), ("t2", "requeued"), ("t3", "requeued"), ("t2", "verified"), ("t3", "verified")]


def test_a_batch_inside_a_speculation_is_bisected_and_what_was_built_on_it_cancelled():
    q = queue(8, 2, 3, both("t2", "t3")).drive()
    assert [s.task_id for s in q.state.steps if s.status == "rejected"] == ["t3"]
    assert sorted(s.task_id for s in q.state.steps if s.status == "verified") == [
        f"t{n}" for n in range(1, 9) if n != 3]
    # the batch 3..4 failed: the batch 5..6 built on it was cancelled as soon as that was known
    assert (5, 6, 4) in q.cancelled  # step 4 closes the batch known to fail (its culprit is not known yet)


@pytest.mark.parametrize("speculate", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("batch", [1, 2, 3])
@pytest.mark.parametrize("latest_first", [False, True])
def test_every_speculation_lands_the_same_steps(speculate, batch, latest_first):
    """The same final queue whatever the depth, the batch and the order checks end in."""
    q = queue(9, batch, speculate, both("t4", "t7")).drive(latest_first=latest_first)
    assert [s.task_id for s in q.state.steps if s.status == "rejected"] == ["t7"]
    assert sorted(s.task_id for s in q.state.steps if s.status == "verified") == sorted(
        f"t{n}" for n in range(1, 10) if n != 7)
    assert q.state.running() == ()


def test_the_speculation_events_fold_from_their_json():
    q = queue(2, 1, 2, lambda tasks: False)
    for _ in range(4):
        q.settle()
    made = rules.cancel(q.state, T0)
    assert made == []
    (v1, v2) = q.state.running()
    assert v2.assumed == (1,) and v2.head == merge_commit(1)
    state = fold(integration.rejected(q.state, 1, verification_binding=v1.binding_id, check="suite",
                                      check_id="c", code="exit", message="failed", now=T0), q.state)
    state = fold(integration.requeue_after(state, 1, now=T0), state)
    (cancelled,) = rules.cancel(state, T0)
    again = ev.IntegrationVerificationCancelled.model_validate_json(cancelled.model_dump_json())
    assert fold([again], state) == fold([cancelled], state)
    assert again.because_of == 1 and "dropped (rejected)" in again.message  # the cause, not its own step requeued
    assert fold([cancelled], state).running() == ()


def test_the_failing_step_alone_whose_merge_ended_the_failed_batch_is_rejected_without_a_check_again():
    q = queue(6, 4, 2, both("t1", "t4")).drive()
    assert [s.task_id for s in q.state.steps if s.status == "rejected"] == ["t4"]
    # 1..4 failed on step 4's merge; 1..2 and 3 passed; 4 alone is known to fail: no check run of its own
    assert (1, 4, "failed") in q.runs and (4, 4, "failed") not in q.runs and (4, 4, "passed") not in q.runs
    assert rules.to_start(q.state, batch=4, speculate=2) == []
    (rejected,) = [s for s in q.state.steps if s.status == "rejected"]
    started = [(first, last) for first, last, _ in q.started]
    assert (1, 4) in started and (4, 4) not in started  # never started alone
    assert rejected.verification_binding is not None
