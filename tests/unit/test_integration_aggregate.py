"""The Integration aggregate's pure decisions: a step's intent and the target's intent on every observation."""

from __future__ import annotations

import pytest

from docket.domain import events as ev
from docket.domain.merge_queue import integration, target_move
from docket.domain.effects import Act, IntegrationObservation, Unknown
from docket.domain.kernel.errors import Refused
from docket.domain.run import Run

from .builders import T0

HEAD, MERGE, CANDIDATE, OTHER, TREE = "a" * 40, "b" * 40, "c" * 40, "d" * 40, "e" * 40
BINDING = "f" * 64
RUN = Run(run_id="r1", version=3, goal="g", target_branch="release", budget_ms=None, status="active",
          opened_at=T0, base_commit=HEAD)


def fold(events: list[ev.Event], state: integration.Integration | None = None) -> integration.Integration:
    for n, event in enumerate(events, start=100):
        state = integration.apply(state, event, n)
    assert state is not None
    return state


def prepared(steps: int = 2) -> integration.Integration:
    return fold(integration.prepare(
        None, RUN, repository="/repo/.git", target_branch="release", expected_commit=HEAD,
        integration_ref="refs/docket/integrations/r1",
        steps=[ev.IntegrationStep(task_id=f"t{n}", binding_id=BINDING, commit=CANDIDATE, worker_id=f"t{n}",
                                  generation=1) for n in range(1, steps + 1)],
        required_checks=[], overlaps=[], approval_required=False, now=T0))


def step_requested(state: integration.Integration, number: int = 1, head: str = HEAD,
                   merge: str = "merged") -> tuple[integration.Integration, ev.IntegrationStepRequested]:
    (intent,) = integration.request_step(state, number, intent_id=f"i{number}", head=head,
                                         merge_commit=MERGE if merge == "merged" else head, tree=TREE, merge=merge,
                                         now=T0)
    assert isinstance(intent, ev.IntegrationStepRequested)
    return fold([intent], state), intent


@pytest.mark.parametrize("observed, step, expected", [
    (IntegrationObservation("missing"), 1, "act"),
    (IntegrationObservation("missing"), 2, "IntegrationStepFailed"),
    (IntegrationObservation("at-parent", commit=HEAD), 1, "act"),
    (IntegrationObservation("merged", commit=MERGE), 1, "IntegrationStepMerged"),
    (IntegrationObservation("merged", commit=OTHER), 1, "IntegrationStepFailed"),  # merged, but not by this step
    (IntegrationObservation("diverged", commit=OTHER), 1, "IntegrationStepFailed"),
    (IntegrationObservation("unreadable", detail="gone"), 1, "unknown"),
])
def test_decide_step_on_each_observation(observed, step, expected):
    state = prepared()
    if step == 2:
        state, first = step_requested(state)
        state = fold([integration.decide_step(state, first, IntegrationObservation("merged", commit=MERGE), T0)],
                     state)
        state = fold(integration.verified(state, 1, verification_binding=BINDING, tree=TREE, checks=[], now=T0),
                     state)
        state, intent = step_requested(state, 2, head=MERGE)
    else:
        state, intent = step_requested(state)
    decided = integration.decide_step(state, intent, observed, T0)
    if expected == "act":
        assert isinstance(decided, Act)
    elif expected == "unknown":
        assert isinstance(decided, Unknown) and "gone" in decided.reason
    else:
        assert decided.type_name() == f"{expected}.v1"
    if expected == "IntegrationStepFailed":
        assert decided.code == "integration-ref-moved"
    if expected == "IntegrationStepMerged":
        assert (decided.result, integration.made(decided).result) == ("observed", "created")
        assert fold([decided], state).step(1).status == "merged"


def test_an_already_merged_step_names_its_head_and_is_merged_once_the_ref_names_it():
    state, intent = step_requested(prepared(), merge="already-merged")
    assert (intent.merge_commit, intent.merge) == (HEAD, "already-merged")
    assert isinstance(integration.decide_step(state, intent, IntegrationObservation("missing"), T0), Act)
    done = integration.decide_step(state, intent, IntegrationObservation("at-parent", commit=HEAD), T0)
    assert done.type_name() == "IntegrationStepMerged.v1" and done.merge == "already-merged"


def verified_all(steps: int = 1) -> integration.Integration:
    state = prepared(steps)
    head = HEAD
    for number in range(1, steps + 1):
        state, intent = step_requested(state, number, head=head)
        state = fold([integration.decide_step(state, intent, IntegrationObservation("merged", commit=MERGE), T0)],
                     state)
        state = fold(integration.verified(state, number, verification_binding=BINDING, tree=TREE, checks=[],
                                          now=T0), state)
        head = MERGE
    assert state.status == "updating-target"
    return state


def target_requested(state: integration.Integration, intent_id: str = "t",
                     checkout: str | None = None) -> tuple[integration.Integration, ev.IntegrationTargetRequestedV2]:
    (intent,) = target_move.request_target(state, intent_id=intent_id, checkout=checkout, now=T0)
    assert isinstance(intent, ev.IntegrationTargetRequestedV2) and intent.checkout == checkout
    return fold([intent], state), intent


TO = target_move.TargetObservation
CO = target_move.CheckoutObservation


@pytest.mark.parametrize("observed, expected, code", [
    (TO("found", commit=HEAD), "act", None),
    (TO("found", commit=MERGE), "IntegrationCompleted", None),
    (TO("found", commit=MERGE, checked_out="/elsewhere"), "IntegrationCompleted", None),  # done already
    (TO("found", commit=OTHER), "IntegrationTargetMoved", "target-moved"),
    (TO("missing"), "IntegrationTargetMoved", "target-moved"),
    (TO("found", commit=HEAD, checked_out="/repo"), "IntegrationTargetMoved", "target-checked-out"),
    (TO("unreadable", detail="locked"), "unknown", None),
])
@pytest.mark.parametrize("version", [1, 2, 3])
def test_decide_target_on_each_observation(observed, expected, code, version):
    """An intent that names no checkout (and every v1 intent, recorded before checkouts were updated) never moves a
    branch some worktree has checked out; a v3 intent (the target on a shared remote) is decided the same way on
    what the remote's branch names."""
    state, intent = target_requested(verified_all())
    if version == 1:
        intent = ev.IntegrationTargetRequested(**intent.model_dump(exclude={"checkout"}))
    if version == 3:
        (intent,) = target_move.request_target(verified_all(), intent_id="t", checkout="/repo", now=T0,
                                               remote=("origin", "/srv/git/repo.git"))
        assert isinstance(intent, ev.IntegrationTargetRequestedV3) and intent.checkout is None  # never a checkout
        assert (intent.remote, intent.remote_url) == ("origin", "/srv/git/repo.git")
    assert (intent.expected_commit, intent.commit, intent.tree) == (HEAD, MERGE, TREE)
    decided = target_move.decide_target(state, intent, observed, T0)
    if expected == "act":
        assert isinstance(decided, Act)
        return
    if expected == "unknown":
        assert isinstance(decided, Unknown) and "locked" in decided.reason
        return
    assert decided.type_name() == f"{expected}.v1"
    after = fold([decided], state)
    if code is None:
        assert (after.status, after.final_commit, after.final_tree) == ("completed", MERGE, TREE)
    else:
        assert decided.code == code and after.target_code == code


def test_a_target_moved_by_someone_else_stops_the_integration_for_good():
    state, intent = target_requested(verified_all())
    after = fold([target_move.decide_target(state, intent, TO("found", commit=OTHER), T0)], state)
    assert after.status == "stopped" and after.ended
    assert target_move.request_target(after, intent_id="again", now=T0) == []


def test_a_target_checked_out_is_asked_again_once_switched_away():
    state, intent = target_requested(verified_all())
    after = fold([target_move.decide_target(state, intent, TO("found", commit=HEAD, checked_out="/repo"), T0)],
                 state)
    assert after.status == "updating-target" and not after.ended and after.target_code == "target-checked-out"
    after, again = target_requested(after, "t2")
    assert isinstance(target_move.decide_target(after, again, TO("found", commit=HEAD), T0), Act)


def test_a_conflicted_step_stops_the_queue_and_nothing_is_asked_after_it():
    state = prepared()
    state = fold(integration.conflicted(state, 1, head=HEAD, reason="conflicted", paths=["a.txt"], message="m",
                                        now=T0), state)
    assert state.status == "stopped" and state.next_step() is None and state.step(1).paths == ("a.txt",)
    assert integration.request_step(state, 2, intent_id="i", head=HEAD, merge_commit=MERGE, tree=TREE,
                                    merge="merged", now=T0) == []


def test_a_step_another_integrator_settled_first_is_nothing_to_decide_and_a_later_one_is_refused():
    state, intent = step_requested(prepared())
    state = fold([integration.decide_step(state, intent, IntegrationObservation("merged", commit=MERGE), T0)], state)
    with pytest.raises(Refused) as early:  # step 2 while step 1 is still to verify
        integration.request_step(state, 2, intent_id="i2", head=MERGE, merge_commit=OTHER, tree=TREE,
                                 merge="merged", now=T0)
    assert early.value.code == "step-not-next"
    (verdict,) = integration.verified(state, 1, verification_binding=BINDING, tree=TREE, checks=[], now=T0)
    state = fold([verdict], state)
    # a racing integrator's verdict on step 1, decided after this one: nothing more is recorded
    assert integration.verified(state, 1, verification_binding=BINDING, tree=TREE, checks=[], now=T0) == []
    assert integration.rejected(state, 1, verification_binding=BINDING, check="ok", check_id="c", code="failed",
                                message="m", now=T0) == []
    assert integration.request_step(state, 1, intent_id="again", head=HEAD, merge_commit=MERGE, tree=TREE,
                                    merge="merged", now=T0) == []
    with pytest.raises(Refused) as unknown:
        integration.verified(state, 3, verification_binding=BINDING, tree=TREE, checks=[], now=T0)
    assert unknown.value.code == "step-not-next"


@pytest.mark.parametrize("observed, expected, code", [
    (TO("found", commit=HEAD, checked_out="/repo", checkout=CO("at-old")), "act", None),  # all three steps to do
    (TO("found", commit=HEAD, checked_out="/repo", checkout=CO("at-new")), "act", None),  # only the branch left
    (TO("found", commit=HEAD, checked_out="/repo", checkout=CO("dirty", ("staged a.txt", "untracked b.txt"))),
     "IntegrationTargetMoved", "target-checked-out"),
    (TO("found", commit=HEAD, checked_out="/repo", checkout=CO("unreadable", detail="no git")), "unknown", None),
    (TO("found", commit=HEAD, checked_out="/other", checkout=None), "IntegrationTargetMoved", "target-checked-out"),
    (TO("found", commit=HEAD), "act", None),  # switched away meanwhile: the branch alone
    (TO("found", commit=MERGE, checked_out="/repo", checkout=CO("dirty", ("unstaged a.txt",))),
     "IntegrationCompleted", None),  # moved: the checkout is its owner's again
    (TO("found", commit=OTHER, checked_out="/repo", checkout=CO("at-new")), "act", None),  # moved back first
    (TO("missing", checked_out="/repo", checkout=CO("at-new")), "act", None),
    (TO("found", commit=OTHER, checked_out="/repo", checkout=CO("at-old")), "IntegrationTargetMoved", "target-moved"),
    (TO("found", commit=OTHER, checked_out="/repo", checkout=CO("dirty", ("unstaged a.txt",))),
     "IntegrationTargetMoved", "target-moved"),
])
def test_decide_target_with_a_checkout_on_each_observation(observed, expected, code):
    state, intent = target_requested(verified_all(), checkout="/repo")
    decided = target_move.decide_target(state, intent, observed, T0)
    if expected == "act":
        assert isinstance(decided, Act)
        return
    if expected == "unknown":
        assert isinstance(decided, Unknown) and "no git" in decided.reason
        return
    assert decided.type_name() == f"{expected}.v1"
    if code == "target-checked-out" and observed.checkout is not None:
        assert "staged a.txt, untracked b.txt" in decided.message and "moved nothing" in decided.message
    if code == "target-moved" and observed.checkout.state == "dirty":
        assert "left as it is (unstaged a.txt)" in decided.message
    after = fold([decided], state)
    assert after.target_code == code


def test_a_v1_intent_is_folded_as_the_target_requested():
    state, intent = target_requested(verified_all())
    legacy = ev.IntegrationTargetRequested(**intent.model_dump(exclude={"checkout"}))
    assert fold([legacy], verified_all()) == state


@pytest.mark.parametrize("checkout, policy, expected", [
    (None, "update", "/repo"),
    (CO("at-old"), "update", "/repo"),
    (CO("at-new"), "update", "/repo"),  # updated, the branch not yet moved: the intent finishes it
    (CO("at-old"), "refuse", "refuse"),
    (CO("dirty", ("staged a.txt", "unstaged b.txt", "untracked c.txt")), "update", "staged a.txt, unstaged b.txt"),
    (CO("unreadable", detail="git not found"), "update", "git not found"),
])
def test_which_checkout_the_target_intent_may_update(checkout, policy, expected):
    assert target_move.checkout_to_update("main", TO("found", commit=HEAD), policy=policy) is None
    observed = TO("found", commit=HEAD, checked_out="/repo", checkout=checkout or CO("at-old"))
    if expected == "/repo":
        assert target_move.checkout_to_update("main", observed, policy=policy) == "/repo"
        return
    with pytest.raises(Refused) as refused:
        target_move.checkout_to_update("main", observed, policy=policy)
    assert refused.value.code == "target-checked-out" and expected in refused.value.message
    assert "/repo" in refused.value.message


# --- a queue that goes on (IntegrationPrepared v2) -----------------------------------------------------------------


def rolling(steps: int = 2) -> integration.Integration:
    state = fold(integration.open_queue(None, RUN, repository="/repo/.git", target_branch="release",
                                        expected_commit=HEAD, integration_ref="refs/docket/integrations/r1",
                                        required_checks=[], now=T0))
    for n in range(1, steps + 1):
        step = ev.IntegrationStep(task_id=f"t{n}", binding_id=f"{n:x}" * 64, commit=CANDIDATE, worker_id=f"t{n}",
                                  generation=1)
        state = fold(integration.queue_step(state, RUN, step, waiting_for=[], overlaps=[], now=T0), state)
    return state


def test_a_conflicted_step_stops_a_fixed_queue_but_is_dropped_from_one_that_goes_on():
    def conflict(state: integration.Integration) -> integration.Integration:
        return fold(integration.conflicted(state, 1, head=HEAD, reason="conflicted", paths=["notes.txt"],
                                           message="no", now=T0), state)

    assert conflict(prepared()).status == "stopped"  # an old ledger's meaning is kept
    state = conflict(rolling())
    assert state.status == "merging" and state.next_step().step == 2 and state.step(1).base == HEAD
    state, intent = step_requested(state, 2)
    # the first step that moves the integration ref creates it, whatever its number
    assert isinstance(integration.decide_step(state, intent, IntegrationObservation("missing"), T0), Act)
    state = fold([integration.decide_step(state, intent, IntegrationObservation("merged", commit=MERGE), T0)], state)
    state = fold(integration.verified(state, 2, verification_binding=BINDING, tree=TREE, checks=[], now=T0), state)
    assert state.status == "updating-target"  # the target moves before the queue is closed
    (target,) = target_move.request_target(state, intent_id="m1", now=T0)
    assert (target.expected_commit, target.commit) == (HEAD, MERGE)
    state = fold([target_move.decide_target(state, target, target_move.TargetObservation("found", commit=MERGE),
                                            T0)], state)
    assert state.status == "open" and state.target_expected == MERGE and state.delivered(state.step(2))
    assert not state.delivered(state.step(1))
    state = fold(integration.close_queue(state, RUN, unfinished=[], now=T0), state)
    assert state.status == "completed" and state.ended


def test_a_queue_that_goes_on_takes_no_step_of_an_unintegrated_dependency_and_closes_only_when_tasks_finished():
    state = rolling(0)
    step = ev.IntegrationStep(task_id="t2", binding_id=BINDING, commit=CANDIDATE, worker_id="t2", generation=1)
    with pytest.raises(Refused) as refused:
        integration.queue_step(state, RUN, step, waiting_for=["t1"], overlaps=[], now=T0)
    assert refused.value.code == "dependencies-unsettled"
    with pytest.raises(Refused) as refused:
        integration.close_queue(state, RUN, unfinished=["t1"], now=T0)
    assert refused.value.code == "tasks-unfinished"
    state = fold(integration.close_queue(state, RUN, unfinished=[], now=T0), state)
    assert state.status == "stopped"  # closed with nothing delivered


def test_the_target_of_a_queue_that_goes_on_moves_though_a_step_was_queued_after_the_last_verified_one():
    state = rolling(1)
    state, intent = step_requested(state, 1)
    state = fold([integration.decide_step(state, intent, IntegrationObservation("merged", commit=MERGE), T0)], state)
    state = fold(integration.verified(state, 1, verification_binding=BINDING, tree=TREE, checks=[], now=T0), state)
    late = ev.IntegrationStep(task_id="t9", binding_id="9" * 64, commit=CANDIDATE, worker_id="t9", generation=1)
    state = fold(integration.queue_step(state, RUN, late, waiting_for=[], overlaps=[], now=T0), state)
    assert state.status == "merging"
    (target,) = target_move.request_target(state, intent_id="m1", now=T0)
    assert (target.expected_commit, target.commit) == (HEAD, MERGE)


def test_a_queue_opened_on_a_target_someone_moved_goes_on_from_there_and_records_what_docket_never_saw():
    from docket.domain.effects import ForeignCommits

    foreign = ForeignCommits((OTHER, MERGE), 2, True, True)
    events = integration.open_queue(None, RUN, repository="/repo/.git", target_branch="release",
                                    expected_commit=OTHER, integration_ref="refs/docket/integrations/r1",
                                    required_checks=[], now=T0, foreign=foreign)
    prepared_event, moved = events
    assert prepared_event.expected_commit == OTHER and moved.version == prepared_event.version + 1
    assert isinstance(moved, ev.IntegrationTargetMovedByOthers)
    assert (moved.seen, moved.expected_commit, moved.found, moved.foreign_commits, moved.foreign_count,
            moved.complete, moved.keeps_expected) == ("queue-opened", HEAD, OTHER, [OTHER, MERGE], 2, True, True)
    state = fold(events)
    assert state.moved_by_others == ((HEAD, OTHER),) and state.status == "open"
    assert not target_move.moved_unrecorded(state)
    # on the run's base: nothing more than the queue
    assert len(integration.open_queue(None, RUN, repository="/repo/.git", target_branch="release",
                                      expected_commit=HEAD, integration_ref="refs/docket/integrations/r1",
                                      required_checks=[], now=T0)) == 1


def test_a_target_found_moved_when_it_was_to_move_records_the_foreign_commits_once():
    from docket.domain.effects import ForeignCommits

    state, intent = target_requested(verified_all())
    assert target_move.moved_by_others(state, None, T0) == []
    state = fold([target_move.decide_target(state, intent, TO("found", commit=OTHER), T0)], state)
    assert target_move.moved_unrecorded(state)
    (moved,) = target_move.moved_by_others(state, ForeignCommits((OTHER,), 1, True, False), T0)
    assert (moved.seen, moved.expected_commit, moved.found, moved.foreign_commits, moved.keeps_expected) == (
        "target-moved", HEAD, OTHER, [OTHER], False)
    state = fold([moved], state)
    assert not target_move.moved_unrecorded(state) and target_move.moved_by_others(state, None, T0) == []
    assert state.status == "stopped"


def test_a_fixed_queue_prepared_on_a_moved_target_records_what_docket_never_saw_too():
    from docket.domain.effects import ForeignCommits

    events = integration.prepare(
        None, RUN, repository="/repo/.git", target_branch="release", expected_commit=OTHER,
        integration_ref="refs/docket/integrations/r1",
        steps=[ev.IntegrationStep(task_id="t1", binding_id=BINDING, commit=CANDIDATE, worker_id="t1", generation=1)],
        required_checks=[], overlaps=[], approval_required=False, now=T0,
        foreign=ForeignCommits((OTHER,), 1, True, True))
    prepared_event, moved = events
    assert isinstance(moved, ev.IntegrationTargetMovedByOthers) and moved.version == prepared_event.version + 1
    assert (moved.seen, moved.expected_commit, moved.found, moved.foreign_commits) == (
        "queue-opened", HEAD, OTHER, [OTHER])
    assert fold(events).moved_by_others == ((HEAD, OTHER),)
