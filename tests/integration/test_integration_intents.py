"""The two intent kinds of the merge queue against real git: observe, decide and act on each state of the world."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel.intents import INTEGRATION_STEP, INTEGRATION_TARGET
from docket.adapters.world.git.capture import DulwichCapture
from docket.adapters.world.git.integration_refs import DulwichMerges
from docket.domain import events as ev
from docket.domain.merge_queue import integration, target_move
from docket.domain.effects import Act, Unknown
from docket.domain.run import Run

from ..conftest import git

T0 = "2026-01-01T00:00:00.000Z"
REF = "refs/docket/integrations/r1"
BINDING = "f" * 64


@pytest.fixture
def world(repo: Path):  # noqa: ANN201
    """The repository (main checked out), a branch release at the base, and two candidates off the base."""
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "release")
    candidates = []
    for name in ("a.txt", "b.txt"):
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=name, text=True,
                              capture_output=True, check=True).stdout.strip()
        tree = subprocess.run(["git", "mktree"], cwd=repo, text=True, capture_output=True, check=True,
                              input=f"100644 blob {blob}\t{name}\n"
                                    + git(repo, "ls-tree", base) + "\n").stdout.strip()
        candidates.append(git(repo, "commit-tree", "-p", base, "-m", name, tree))
    return repo, base, candidates


def prepared(repo: Path, base: str, candidates: list[str], target: str = "release") -> integration.Integration:
    run = Run(run_id="r1", version=3, goal="g", target_branch=target, budget_ms=None, status="active",
              opened_at=T0, base_commit=base)
    events = integration.prepare(
        None, run, repository=str(repo / ".git"), target_branch=target, expected_commit=base, integration_ref=REF,
        steps=[ev.IntegrationStep(task_id=f"t{n}", binding_id=BINDING, commit=c, worker_id=f"t{n}", generation=1)
               for n, c in enumerate(candidates, start=1)],
        required_checks=[], overlaps=[], approval_required=False, now=T0)
    return fold(None, events)


def fold(state, events):  # noqa: ANN001, ANN201
    for n, event in enumerate(events, start=1):
        state = integration.apply(state, event, n)
    return state


def drive(kind, state, intent):  # noqa: ANN001, ANN201
    """The effector's protocol in one pass: observe, decide; on Act, act, observe again and decide once more."""
    port = DulwichMerges()
    decided = kind.decide(state, intent, kind.observe(port, intent, None), T0)
    if isinstance(decided, Act):
        kind.act(port, intent, kind.observe(port, intent, None))
        decided = kind.made(kind.decide(state, intent, kind.observe(port, intent, None), T0))
    return decided


def merge_step(state, number: int):  # noqa: ANN001, ANN201
    """Compute the step's merge and record its intent."""
    head = state.head()
    merged = DulwichMerges().merge_candidate(Path(state.repository), head, state.step(number).commit,
                                             f"step {number}\n")
    (intent,) = integration.request_step(state, number, intent_id=f"i{number}", head=head,
                                         merge_commit=merged.commit, tree=merged.tree, merge=merged.state, now=T0)
    return fold(state, [intent]), intent


def verify(state, number: int):  # noqa: ANN001, ANN201
    return fold(state, integration.verified(state, number, verification_binding=BINDING,
                                            tree=state.step(number).tree, checks=[], now=T0))


def test_the_steps_create_then_move_the_integration_ref_and_the_target_moves_by_compare_and_swap(world):
    repo, base, candidates = world
    state = prepared(repo, base, candidates)
    for number in (1, 2):  # 1: the ref is absent (create-only); 2: it names step 1's merge
        state, intent = merge_step(state, number)
        outcome = drive(INTEGRATION_STEP, state, intent)
        assert (outcome.type_name(), outcome.result) == ("IntegrationStepMerged.v1", "created")
        assert git(repo, "rev-parse", REF) == intent.merge_commit
        assert drive(INTEGRATION_STEP, state, intent).result == "observed"  # again: found so, nothing moved
        state = verify(fold(state, [outcome]), number)
    (target,) = target_move.request_target(state, intent_id="t", now=T0)
    state = fold(state, [target])
    outcome = drive(INTEGRATION_TARGET, state, target)
    assert (outcome.type_name(), outcome.result) == ("IntegrationCompleted.v1", "created")
    assert git(repo, "rev-parse", "release") == target.commit == git(repo, "rev-parse", REF)
    assert git(repo, "rev-parse", "main") == base  # the checked-out branch untouched
    assert git(repo, "status", "--porcelain") == ""


def test_an_integration_ref_moved_outside_docket_fails_the_step_and_is_left_alone(world):
    repo, base, candidates = world
    state = prepared(repo, base, candidates)
    state, intent = merge_step(state, 1)
    git(repo, "update-ref", REF, candidates[1])
    outcome = drive(INTEGRATION_STEP, state, intent)
    assert (outcome.type_name(), outcome.code, outcome.found) == (
        "IntegrationStepFailed.v1", "integration-ref-moved", candidates[1])
    assert git(repo, "rev-parse", REF) == candidates[1]


def test_an_already_merged_step_creates_the_ref_at_its_head(world):
    repo, base, candidates = world
    state = prepared(repo, base, [base])  # the candidate is the head itself
    state, intent = merge_step(state, 1)
    assert (intent.merge, intent.merge_commit) == ("already-merged", base)
    outcome = drive(INTEGRATION_STEP, state, intent)
    assert (outcome.type_name(), outcome.merge) == ("IntegrationStepMerged.v1", "already-merged")
    assert git(repo, "rev-parse", REF) == base


def target_intent(repo: Path, base: str, candidates: list[str], target: str = "release"):  # noqa: ANN201
    state = prepared(repo, base, candidates[:1], target=target)
    state, intent = merge_step(state, 1)
    state = verify(fold(state, [drive(INTEGRATION_STEP, state, intent)]), 1)
    (requested,) = target_move.request_target(state, intent_id="t", now=T0)
    return fold(state, [requested]), requested


def test_a_target_moved_by_someone_else_is_not_moved(world):
    repo, base, candidates = world
    state, intent = target_intent(repo, base, candidates)
    git(repo, "update-ref", "refs/heads/release", candidates[1])
    outcome = drive(INTEGRATION_TARGET, state, intent)
    assert (outcome.type_name(), outcome.code, outcome.found) == (
        "IntegrationTargetMoved.v1", "target-moved", candidates[1])
    DulwichMerges().advance_ref(repo / ".git", "refs/heads/release", base, intent.commit)  # the CAS refuses too
    assert git(repo, "rev-parse", "release") == candidates[1]


def test_a_target_checked_out_in_the_main_worktree_is_not_moved(world):
    repo, base, candidates = world
    state, intent = target_intent(repo, base, candidates, target="main")
    observed = DulwichMerges().observe_target(repo / ".git", "main")
    assert (observed.state, observed.commit, observed.checked_out) == ("found", base, str(repo))
    outcome = drive(INTEGRATION_TARGET, state, intent)
    assert (outcome.type_name(), outcome.code) == ("IntegrationTargetMoved.v1", "target-checked-out")
    assert git(repo, "rev-parse", "main") == base


def test_observe_target_sees_linked_worktrees_bare_repositories_and_what_cannot_be_read(world, tmp_path):
    repo, base, _ = world
    port = DulwichMerges()
    assert port.observe_target(repo / ".git", "release") == target_move.TargetObservation("found", commit=base)
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked), "release")
    assert port.observe_target(repo / ".git", "release").checked_out == str(linked)
    git(linked, "switch", "-q", "--detach")
    assert port.observe_target(repo / ".git", "release").checked_out is None
    assert port.observe_target(repo / ".git", "absent").state == "missing"
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    assert port.observe_target(bare, "main") == target_move.TargetObservation("found", commit=base)  # HEAD, no checkout
    assert port.observe_target(tmp_path / "nowhere", "main").state == "unreadable"
    state, intent = target_intent(repo, base, [base], target="main")
    intent = intent.model_copy(update={"repository": str(tmp_path / "nowhere")})
    assert isinstance(drive(INTEGRATION_TARGET, state, intent), Unknown)


def test_changed_paths_of_a_merge_against_the_base(world):
    repo, base, candidates = world
    merged = DulwichMerges().merge_candidate(repo / ".git", candidates[0], candidates[1], "m\n")
    assert DulwichCapture().changed_paths(repo / ".git", base, merged.commit) == ("a.txt", "b.txt")


def test_the_fake_observes_the_target_as_the_real_one_does(tmp_path):
    from tests.fakes.merges import FakeMerges
    from tests.fakes.repository import FakeRepository

    repo = FakeRepository(main_branch="main")
    tip = repo.point("release")
    repo.branches["main"] = tip
    repo.worktrees[tmp_path / "linked"] = "side"
    repo.branches["side"] = tip
    common = tmp_path / ".git"
    fake = FakeMerges({common: repo})
    assert fake.observe_target(common, "release") == target_move.TargetObservation("found", commit=tip)
    assert fake.observe_target(common, "main").checked_out == str(tmp_path)  # the main checkout, not the git dir
    assert fake.observe_target(common, "side").checked_out == str(tmp_path / "linked")
    assert fake.observe_target(common, "absent").state == "missing"
    assert fake.observe_target(tmp_path / "nowhere", "main").state == "unreadable"
