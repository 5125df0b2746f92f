"""A queue that goes on, whose target was moved while it worked, goes on from the moved target (domain/merge_queue/requeue.py):
who moved it, whether the queue may go on from there, and how many times one command follows it."""

from __future__ import annotations

import pytest

from docket.domain import events as ev
from docket.domain.merge_queue import integration, requeue, target_move
from docket.domain.effects import ForeignCommits, IntegrationObservation
from docket.domain.kernel.errors import Refused

from .builders import T0
from .test_integration_aggregate import CANDIDATE, HEAD, OTHER, RUN, TREE, fold, rolling

M1, M2, M3, THEIRS = "1" * 40, "2" * 40, "3" * 40, "9" * 40


def _merged_and_verified(state: integration.Integration, number: int, merge: str) -> integration.Integration:
    (intent,) = integration.request_step(state, number, intent_id=f"i{number}", head=state.ref_from(),
                                         merge_commit=merge, tree=TREE, merge="merged", now=T0)
    state = fold([intent], state)
    state = fold([integration.decide_step(state, intent, IntegrationObservation("merged", commit=merge), T0)], state)
    return fold(integration.verified(state, number, verification_binding=f"{number}" * 64, tree=TREE, checks=[],
                                     now=T0), state)


def _found_moved(state: integration.Integration, found: str) -> integration.Integration:
    (intent,) = target_move.request_target(state, intent_id=f"m{state.version}", now=T0)
    return fold([target_move.decide_target(state, intent, target_move.TargetObservation("found", commit=found), T0)],
                state)


def _two_verified_one_delivered() -> integration.Integration:
    """Step 1 verified and delivered (the target at M1), step 2 verified, its target move finding THEIRS."""
    state = _merged_and_verified(rolling(2), 1, M1)
    (intent,) = target_move.request_target(state, intent_id="m1", now=T0)
    state = fold([target_move.decide_target(state, intent, target_move.TargetObservation("found", commit=M1), T0)],
                 state)
    state = _merged_and_verified(state, 2, M2)
    return _found_moved(state, THEIRS)


def test_other_docket_runs_moves_are_told_from_a_strangers():
    completed, merged = {THEIRS: "other"}, {M3: "other", THEIRS: "other"}
    known = requeue.docket_moves([THEIRS, M3, M1], M1, completed=completed, merged=merged)
    assert known == requeue.DocketMoves(("other",), (THEIRS, M3))
    # a commit between that no other run made, a tip no run moved the target to, a line that misses expected
    assert requeue.docket_moves([THEIRS, OTHER, M1], M1, completed=completed, merged=merged) is None
    assert requeue.docket_moves([M3, M1], M1, completed=completed, merged=merged) is None
    assert requeue.docket_moves([THEIRS, M3, HEAD], M1, completed=completed, merged=merged) is None
    assert requeue.docket_moves([M1], M1, completed=completed, merged=merged) is None


def test_a_target_another_docket_run_moved_re_queues_the_undelivered_steps_onto_it():
    state = _two_verified_one_delivered()
    assert state.status == "stopped" and target_move.moved_unrecorded(state)
    known = requeue.DocketMoves(("other",), (THEIRS,))
    made = requeue.requeue(state, known=known, foreign=None, rounds=0, now=T0)
    (again,) = made  # no IntegrationTargetMovedByOthers: the mover is known
    assert isinstance(again, ev.IntegrationRequeued)
    assert (again.round, again.expected_commit, again.onto, again.moved_by, again.requeued, again.first_step) == (
        1, M1, THEIRS, ["other"], [2], 3)
    state = fold(made, state)
    assert state.status == "merging" and not state.ended and state.target_expected == THEIRS
    assert state.delivered(state.step(1)) and state.step(2).status == "requeued"
    copy = state.step(3)
    assert (copy.task_id, copy.status, copy.commit) == ("t2", "waiting", CANDIDATE)
    assert state.head() == THEIRS and state.next_step().step == 3  # merged onto the moved target, from the ref
    state = _merged_and_verified(state, 3, M3)
    (intent,) = target_move.request_target(state, intent_id="m9", now=T0)
    assert (intent.expected_commit, intent.commit) == (THEIRS, M3)
    state = fold([target_move.decide_target(state, intent, target_move.TargetObservation("found", commit=M3), T0)],
                 state)
    assert state.delivered(state.step(3)) and not state.delivered(state.step(2))
    state = fold(integration.close_queue(state, RUN, unfinished=[], now=T0), state)
    assert state.status == "completed"


def test_a_strangers_move_that_kept_the_expected_commit_is_recorded_and_re_queued_onto():
    state = _two_verified_one_delivered()
    made = requeue.requeue(state, known=None, foreign=ForeignCommits((THEIRS,), 1, True, True), rounds=0, now=T0)
    moved, again = made
    assert isinstance(moved, ev.IntegrationTargetMovedByOthers) and moved.foreign_commits == [THEIRS]
    assert isinstance(again, ev.IntegrationRequeued) and again.moved_by == [] and again.version == moved.version + 1
    state = fold(made, state)
    assert state.status == "merging" and state.moved_by_others == ((M1, THEIRS),)


def test_a_strangers_move_that_dropped_the_expected_commit_stops_the_queue_recorded():
    state = _two_verified_one_delivered()
    (moved,) = requeue.requeue(state, known=None, foreign=ForeignCommits((THEIRS,), 1, True, False), rounds=0,
                               now=T0)
    state = fold([moved], state)
    assert state.status == "stopped" and not target_move.moved_unrecorded(state)
    assert requeue.requeue(state, known=None, foreign=None, rounds=0, now=T0) == []


def test_a_target_that_keeps_moving_is_followed_a_bounded_number_of_times_by_one_command():
    state = _two_verified_one_delivered()
    known = requeue.DocketMoves(("other",), (THEIRS,))
    with pytest.raises(Refused) as refused:
        requeue.requeue(state, known=known, foreign=None, rounds=requeue.MAX_ROUNDS, now=T0)
    assert refused.value.code == "target-keeps-moving"
    assert target_move.moved_unrecorded(state)  # nothing recorded: the next command goes on from there


def test_a_step_queued_while_the_target_was_found_moved_waits_for_the_queue_to_go_on():
    state = _two_verified_one_delivered()
    late = ev.IntegrationStep(task_id="t9", binding_id="9" * 64, commit=CANDIDATE, worker_id="t9", generation=1)
    with pytest.raises(Refused) as refused:
        integration.queue_step(state, RUN, late, waiting_for=[], overlaps=[], now=T0)
    assert refused.value.code == "dependencies-unsettled"


def test_a_fixed_queue_found_moved_stops_as_it_always_did():
    from .test_integration_aggregate import target_requested, verified_all

    state, intent = target_requested(verified_all())
    state = fold([target_move.decide_target(state, intent, target_move.TargetObservation("found", commit=OTHER),
                                            T0)], state)
    (moved,) = requeue.requeue(state, known=None, foreign=ForeignCommits((OTHER,), 1, True, True), rounds=0, now=T0)
    assert isinstance(moved, ev.IntegrationTargetMovedByOthers)
    assert fold([moved], state).status == "stopped"


def test_a_queue_opened_on_a_target_other_docket_runs_moved_records_no_stranger():
    from docket.domain.effects import ForeignCommits as Foreign

    common = dict(repository="/repo/.git", target_branch="release", expected_commit=THEIRS,
                  integration_ref="refs/docket/integrations/r1", required_checks=[], now=T0)
    (opened,) = integration.open_queue(None, RUN, **common, moved_by_docket=True)
    assert isinstance(opened, ev.IntegrationPreparedV2) and opened.expected_commit == THEIRS
    _, moved = integration.open_queue(None, RUN, **common, foreign=Foreign((THEIRS,), 1, True, True))
    assert isinstance(moved, ev.IntegrationTargetMovedByOthers)


def _one_verified_one_waiting_found_moved() -> integration.Integration:
    """Step 1 verified, step 2 queued behind it; the move of step 1's merge finds THEIRS."""
    return _found_moved(_merged_and_verified(rolling(2), 1, M1), THEIRS)


def test_a_step_already_queued_when_the_target_was_found_moved_stays_the_integrators():
    """Queued again by its task (a resumed docket go judging it), it is still the queue's: nothing new, no refusal;
    it goes on once re-queued onto the moved target."""
    state = _one_verified_one_waiting_found_moved()
    assert state.ended and target_move.moved_unrecorded(state) and state.step(2).status == "waiting"
    again = ev.IntegrationStep(task_id="t2", binding_id="2" * 64, commit=CANDIDATE, worker_id="t2", generation=1)
    assert integration.queue_step(state, RUN, again, waiting_for=[], overlaps=[], now=T0) == []


def test_a_step_already_queued_in_a_queue_that_stopped_is_told_so():
    """The queue stopped (a stranger's move dropped the expected commit) with a step never taken: its task is told
    the queue stopped (and finishes passed, undelivered) instead of waiting for a step that will never come."""
    state = _one_verified_one_waiting_found_moved()
    (moved,) = requeue.requeue(state, known=None, foreign=ForeignCommits((THEIRS,), 1, True, False), rounds=0,
                               now=T0)
    state = fold([moved], state)
    assert state.status == "stopped" and state.step(2).status == "waiting"
    again = ev.IntegrationStep(task_id="t2", binding_id="2" * 64, commit=CANDIDATE, worker_id="t2", generation=1)
    with pytest.raises(Refused) as refused:
        integration.queue_step(state, RUN, again, waiting_for=[], overlaps=[], now=T0)
    assert refused.value.code == "queue-stopped"
