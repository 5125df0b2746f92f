"""[integration] batch (domain/merge_queue/integration.py): steps merged one on top of the other into an open batch, one check run
on the last one's merge, and a failing batch bisected, deterministically, to the first step whose merge fails."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from docket.domain import events as ev
from docket.domain.merge_queue import integration
from docket.domain.effects import IntegrationObservation
from docket.domain.kernel.errors import Refused

from .builders import T0
from .test_integration_aggregate import HEAD, RUN, fold, prepared, rolling


def merge_commit(n: int) -> str:
    return f"{n:040x}"


def _merge(state: integration.Integration, number: int, holds: dict[str, frozenset[str]],
           size: int = 1000) -> integration.Integration:
    """Merge the step onto the tip (the open batch's last merge, or the head), as the service layer does."""
    step = state.step(number)
    onto = state.tip()
    commit = merge_commit(number)
    holds[commit] = holds.get(onto, frozenset()) | {step.task_id}
    head = state.ref_from() if state.rolling else state.tip()
    (intent,) = integration.request_step(state, number, intent_id=f"i{number}", head=head, merge_commit=commit,
                                         tree=commit, merge="merged", now=T0, batch_size=size)
    state = fold([intent], state)
    return fold([integration.decide_step(state, intent, IntegrationObservation("merged", commit=commit), T0)], state)


def _check(state: integration.Integration, fails: Callable[[frozenset[str]], bool],
           holds: dict[str, frozenset[str]], runs: list[tuple[int, int, str]]) -> integration.Integration:
    """One check run on the probe's last merge (none when one ran there already), and its verdict recorded as the
    service layer records it."""
    probe = state.probe()
    first, last = probe[0], probe[-1]
    assert last.merge_commit is not None
    recorded = [result for _, ran_on, result in runs if ran_on == last.step]
    if recorded:  # a result on that merge is reused, as a check's recorded result is
        failed = recorded[0] == "failed"
    else:
        failed = fails(holds[last.merge_commit])
        runs.append((first.step, last.step, "failed" if failed else "passed"))
    binding = f"{last.step:064x}"
    if not failed and len(probe) > 1:
        return fold(integration.batch_verified(state, first.step, last.step, verification_binding=binding,
                                               tree=last.merge_commit, checks=[], now=T0), state)
    if not failed:
        return fold(integration.verified(state, last.step, verification_binding=binding, tree=last.merge_commit,
                                         checks=[], now=T0), state)
    if len(probe) > 1:
        return fold(integration.batch_failed(state, first.step, last.step, verification_binding=binding,
                                             tree=last.merge_commit, check="suite", check_id=f"c{len(runs)}",
                                             code="exit", message="failed", now=T0), state)
    rejected = integration.rejected(state, last.step, verification_binding=binding, check="suite",
                                    check_id=f"c{len(runs)}", code="exit", message="failed", now=T0)
    state = fold(rejected, state)
    return fold(integration.requeue_after(state, last.step, now=T0), state)


def drive(state: integration.Integration, size: int, fails: Callable[[frozenset[str]], bool]
          ) -> tuple[integration.Integration, list[tuple[int, int, str]]]:
    """Merge and check the whole queue with batches of size steps; the check runs' (first, last, result)."""
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    runs: list[tuple[int, int, str]] = []
    while True:
        step = state.next_step()
        if step is None:
            return state, runs
        following = next((s for s in state.steps if s.status == "waiting"), None)
        if step.status == "waiting":
            state = _merge(state, step.step, holds)
        elif state.failing is None and len(state.open_batch()) < size and following is not None:
            state = _merge(state, following.step, holds)
        else:
            state = _check(state, fails, holds, runs)


def both(a: str, b: str) -> Callable[[frozenset[str]], bool]:
    return lambda tasks: a in tasks and b in tasks


def test_a_batch_that_passes_is_verified_by_one_check_run_on_its_last_merge():
    state, runs = drive(rolling(8), 4, lambda tasks: False)
    assert runs == [(1, 4, "passed"), (5, 8, "passed")]
    assert [s.status for s in state.steps] == ["verified"] * 8
    assert [s.batch for s in state.steps] == [(1, 4)] * 4 + [(5, 8)] * 4
    assert {s.verification_binding for s in state.steps[:4]} == {f"{4:064x}"}
    assert state.head() == merge_commit(8)  # each merge went onto the one before it


def test_a_failing_batch_is_bisected_to_the_first_failing_step_and_the_steps_after_it_are_queued_again():
    state, runs = drive(rolling(8), 8, lambda tasks: "t5" in tasks)
    # the batch fails; the first half passes (verified); 5..6 fails; 5 alone fails: 5 is the culprit
    assert runs[:4] == [(1, 8, "failed"), (1, 4, "passed"), (5, 6, "failed"), (5, 5, "failed")]
    assert state.step(5).status == "rejected"
    assert [state.step(n).status for n in (6, 7, 8)] == ["requeued"] * 3
    assert [(s.task_id, s.status) for s in state.steps[8:]] == [("t6", "verified"), ("t7", "verified"),
                                                                ("t8", "verified")]
    assert runs[4:] == [(9, 11, "passed")]  # the requeued steps, merged again onto step 4's merge
    assert state.step(5).base == merge_commit(4)  # its repair starts from the verified head


def test_a_failure_two_steps_make_together_ends_at_the_later_one():
    state, runs = drive(rolling(8), 8, both("t2", "t6"))
    assert [s.step for s in state.steps if s.status == "rejected"] == [6]
    assert runs[:4] == [(1, 8, "failed"), (1, 4, "passed"), (5, 6, "failed"), (5, 5, "passed")]
    assert state.step(5).batch is None and state.step(5).status == "verified"  # a probe of one step: verified alone
    # 6 alone is known to fail (the check on 5..6 ran on its merge): rejected without another check run
    assert len(runs) == 5 and runs[4] == (9, 10, "passed")


def test_bisection_is_deterministic():
    one = drive(rolling(12), 12, both("t3", "t10"))
    two = drive(rolling(12), 12, both("t3", "t10"))
    assert one == two
    assert one[1][:4] == [(1, 12, "failed"), (1, 6, "passed"), (7, 9, "passed"), (10, 10, "failed")]


def test_batch_of_one_is_one_check_per_step_as_before():
    state, runs = drive(rolling(4), 1, lambda tasks: "t3" in tasks)
    assert runs == [(1, 1, "passed"), (2, 2, "passed"), (3, 3, "failed"), (4, 4, "passed")]
    assert [s.status for s in state.steps] == ["verified", "verified", "rejected", "verified"]


def test_a_fixed_queue_stops_at_the_culprit_with_the_steps_before_it_verified():
    state, runs = drive(prepared(4), 4, lambda tasks: "t3" in tasks)
    assert [s.status for s in state.steps] == ["verified", "verified", "rejected", "merged"]
    assert state.status == "stopped" and runs[0] == (1, 4, "failed")


@pytest.mark.parametrize("size", [2, 3, 5, 8])
def test_every_batch_size_finds_the_same_culprit_and_verifies_the_rest(size):
    state, _ = drive(rolling(9), size, both("t4", "t7"))
    assert [s.task_id for s in state.steps if s.status == "rejected"] == ["t7"]
    assert sorted(s.task_id for s in state.steps if s.status == "verified") == sorted(
        f"t{n}" for n in range(1, 10) if n != 7)


def test_a_verdict_for_another_range_than_the_probe_is_not_recorded():
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    state = rolling(3)
    for n in (1, 2, 3):
        state = _merge(state, n, holds)
    assert [s.step for s in state.probe()] == [1, 2, 3]
    # a second integrator that recorded the same range already, or a stale one: nothing more
    assert integration.batch_verified(state, 1, 2, verification_binding="b" * 64, tree=merge_commit(2), checks=[],
                                      now=T0) == []
    state = fold(integration.batch_failed(state, 1, 3, verification_binding="b" * 64, tree=merge_commit(3),
                                          check="suite", check_id="c1", code="exit", message="m", now=T0), state)
    assert integration.batch_failed(state, 1, 3, verification_binding="b" * 64, tree=merge_commit(3),
                                    check="suite", check_id="c1", code="exit", message="m", now=T0) == []
    assert [s.step for s in state.probe()] == [1]  # the middle of what lies before the failing merge


def test_while_a_batch_is_bisected_no_step_joins_it():
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    state = rolling(4)
    for n in (1, 2):
        state = _merge(state, n, holds)
    state = fold(integration.batch_failed(state, 1, 2, verification_binding="b" * 64, tree=merge_commit(2),
                                          check="suite", check_id="c1", code="exit", message="m", now=T0), state)
    with pytest.raises(Refused) as refused:
        integration.request_step(state, 3, intent_id="i3", head=state.ref_from(), merge_commit=merge_commit(3),
                                 tree=merge_commit(3), merge="merged", now=T0, batch_size=8)
    assert refused.value.code == "step-not-next"


def test_no_step_merges_onto_an_open_batch_that_is_full():
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    state = rolling(3)
    state = _merge(state, 1, holds)
    state = _merge(state, 2, holds, size=2)
    for size in (1, 2):  # a batch of one step is full at once: one check per step, as before batches
        with pytest.raises(Refused) as refused:
            integration.request_step(state, 3, intent_id="i3", head=state.ref_from(),
                                     merge_commit=merge_commit(3), tree=merge_commit(3), merge="merged", now=T0,
                                     batch_size=size)
        assert refused.value.code == "step-not-next"


def test_the_batch_events_fold_from_their_json():
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    state = rolling(2)
    for n in (1, 2):
        state = _merge(state, n, holds)
    (made,) = integration.batch_verified(state, 1, 2, verification_binding="b" * 64, tree=merge_commit(2),
                                         checks=[], now=T0)
    again = ev.IntegrationBatchVerified.model_validate_json(made.model_dump_json())
    assert fold([again], state) == fold([made], state)
    assert again.tasks == ["t1", "t2"]


@pytest.mark.parametrize("seed", range(20))
def test_a_flaky_check_still_ends_and_the_head_is_always_a_merge_the_checks_passed_on(seed):
    """A check is the candidates' code: it may pass and fail at random. The bisection still ends, and every step
    verified was verified by a passing check run on its own merge or on a later merge of its batch."""
    import random

    chance = random.Random(seed)
    passed_on: set[str] = set()

    def flaky(tasks: frozenset[str]) -> bool:
        return chance.random() < 0.4

    state = rolling(12)
    holds: dict[str, frozenset[str]] = {HEAD: frozenset()}
    runs: list[tuple[int, int, str]] = []
    for _ in range(200):
        step = state.next_step()
        if step is None:
            break
        following = next((s for s in state.steps if s.status == "waiting"), None)
        if step.status == "waiting":
            state = _merge(state, step.step, holds)
        elif state.failing is None and len(state.open_batch()) < 5 and following is not None:
            state = _merge(state, following.step, holds)
        else:
            before = len(runs)
            last = state.probe()[-1]
            state = _check(state, flaky, holds, runs)
            if len(runs) > before and runs[-1][2] == "passed":
                passed_on.add(last.merge_commit)
        assert state.head() == HEAD or state.head() in passed_on
    assert state.next_step() is None  # ended
    for s in state.steps:
        if s.status == "verified":
            checked = s.batch[1] if s.batch else s.step
            assert state.step(checked).merge_commit in passed_on
