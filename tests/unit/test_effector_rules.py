"""The effector's rules, against the fake inventory port and an in-memory ledger: no disk, no git.

tests/integration/test_effector.py holds the same rules against real repositories,
and holds the fake to the real port's promises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel import ledger as ledger_module
from docket.adapters.world.clock import FixedClock
from docket.adapters.service_layer.kernel.effector import Effector
from docket.adapters.service_layer.kernel.intents import INTENT_KINDS, RUN_BASE_PIN, IntentKind
from docket.adapters.service_layer.kernel.ports import Ports
from docket.domain import run
from docket.domain.effects import INTENT_TYPES, Act, BranchObservation, decide_base_pin
from docket.domain.events import EVENT_TYPES, IntentOutcomeUnknownV2, RunBasePinFailed, RunBasePinned
from tests.fakes.inventory import FakeInventory
from tests.fakes.repository import FakeRepository

from .builders import T0

REPOSITORY = "/work/repo/.git"
IDENTITY = "repo-" + "1" * 32


@pytest.fixture
def ledger():
    memory = ledger_module.Ledger(Path(":memory:"))  # SQLite's in-memory database: no file is made
    memory.initialise(T0, IDENTITY, REPOSITORY)
    yield memory
    memory.close()


@pytest.fixture
def repository() -> FakeRepository:
    repo = FakeRepository(identity=IDENTITY)
    repo.point("main")
    return repo


@pytest.fixture
def git(repository) -> FakeInventory:
    return FakeInventory({REPOSITORY: repository})


def effector(ledger, git, clock=None, **kinds) -> Effector:
    return Effector(ledger, clock or FixedClock(T0), Ports(inventory=git), **kinds)


def open_pending(ledger, run_id: str, branch: str = "main", repository: str = REPOSITORY) -> None:
    ledger.decide(lambda now: run.open_run(run_id, f"i-{run_id}", "g", branch, None, repository, now), T0)


def stream(ledger, run_id: str) -> list:
    return [event for _, event in ledger.history(run.stream_of(run_id))]


def test_every_intent_type_has_exactly_one_kind():
    assert set(INTENT_KINDS) == set(INTENT_TYPES)
    for name, kind in INTENT_KINDS.items():
        assert kind.intent is EVENT_TYPES[name] and kind.intent.effect_role == "intent"


def test_a_branch_found_is_pinned(ledger, git, repository):
    open_pending(ledger, "r1")
    (result,) = effector(ledger, git).run_pending()
    assert result.outcome == "RunBasePinned.v1" and not result.unknown
    assert isinstance(result.event, RunBasePinned) and result.event.commit == repository.branches["main"]
    assert stream(ledger, "r1")[-1] == result.event
    assert git.observed == [(Path(REPOSITORY), "main")]
    assert effector(ledger, git).run_pending() == [] and ledger.effector_cursor() == ledger.head()


def test_a_missing_branch_fails_with_unknown_branch(ledger, git):
    open_pending(ledger, "r1", branch="no-such-branch")
    (result,) = effector(ledger, git).run_pending()
    assert isinstance(result.event, RunBasePinFailed) and result.event.code == "unknown-branch"


def test_a_branch_naming_no_commit_fails(ledger, git, repository):
    repository.point("blob", "blob")
    open_pending(ledger, "r1", branch="blob")
    (result,) = effector(ledger, git).run_pending()
    assert isinstance(result.event, RunBasePinFailed) and result.event.code == "branch-not-a-commit"
    assert "names a blob" in result.event.message


def test_an_unreadable_repository_is_unknown_once_then_backs_off_then_is_counted_again(ledger, git, repository):
    repository.readable = False
    open_pending(ledger, "r1")
    clock = FixedClock(T0)
    driver = effector(ledger, git, clock)
    (first,) = driver.run_pending()
    assert first.unknown and first.outcome == "IntentOutcomeUnknown.v2" and "cannot read" in first.reason
    head = ledger.head()
    for _ in range(5):
        assert [r.outcome for r in driver.run_pending()] == ["backing-off"]
    assert ledger.head() == head and len(git.observed) == 1  # not even observed inside the back-off
    clock.advance(1_000)
    (second,) = driver.run_pending()
    assert isinstance(second.event, IntentOutcomeUnknownV2) and second.event.observations == 2
    assert ledger.get(run.apply, run.stream_of("r1")).status == "opening"  # never a failure
    repository.readable = True
    clock.advance(2_000)
    (third,) = driver.run_pending()
    assert third.outcome == "RunBasePinned.v1"


def test_an_intent_resolved_between_observe_and_decide_records_nothing(ledger, repository):
    """The run is aborted (its intent cancelled) after the effector observed and before it decides."""

    class AbortedMeanwhile(FakeInventory):
        def observe_branch(self, repository_path, branch):
            observed = super().observe_branch(repository_path, branch)
            ledger.decide(lambda now: run.abort(ledger.get(run.apply, run.stream_of("r1")), "stop", now), T0)
            return observed

    open_pending(ledger, "r1")
    head = ledger.head() + 2  # RunAborted and IntentCancelled
    (result,) = effector(ledger, AbortedMeanwhile({REPOSITORY: repository})).run_pending()
    assert result.outcome == "already-resolved" and result.position is None and result.event is None
    assert ledger.head() == head
    assert [type(e).__name__ for e in stream(ledger, "r1")][-2:] == ["RunAborted", "IntentCancelled"]


def test_one_unknown_holds_no_other_intent_back(ledger, git):
    open_pending(ledger, "gone", repository="/nowhere/.git")
    open_pending(ledger, "later")
    results = {r.intent_id: r for r in effector(ledger, git).run_pending()}
    assert results["i-gone"].unknown and "/nowhere/.git has no docket identity" in results["i-gone"].reason
    assert results["i-later"].outcome == "RunBasePinned.v1"
    (pending,) = ledger.pending_intents(after=0)
    assert pending.intent.intent_id == "i-gone"
    assert ledger.effector_cursor() == pending.position - 1  # the cursor waits below the stuck one only


def test_a_repository_with_another_identity_is_not_observed(ledger, git):
    other = FakeRepository(identity="repo-" + "2" * 32)
    other.point("main")
    git.repositories[Path("/other/.git")] = other
    open_pending(ledger, "r1", repository="/other/.git")
    (result,) = effector(ledger, git).run_pending()
    assert result.unknown and f"this ledger belongs to repository {IDENTITY}" in result.reason
    assert "/other/.git has identity repo-2222" in result.reason
    assert git.observed == []  # refused before its branches were read


# The act slot: no intent acts yet, so a kind that makes its branch shows the protocol.

class Refs(FakeInventory):
    """A fake port that can also create a branch, create-only, counting what it did."""

    created = 0

    def create_branch(self, repository_path, branch, commit):
        repo = self.repositories[Path(repository_path)]
        if branch not in repo.branches:  # compare-and-swap: only from "absent"
            repo.branches[branch] = commit
            self.created += 1


def _decide_make(run_state, intent, observed: BranchObservation, now):
    return Act() if observed.status == "missing" else decide_base_pin(run_state, intent, observed, now)


def _kind(act) -> dict:
    return {"kinds": {RUN_BASE_PIN.type_name: IntentKind(
        intent=RUN_BASE_PIN.intent, stream_of=RUN_BASE_PIN.stream_of, apply=RUN_BASE_PIN.apply, port="inventory",
        observe=RUN_BASE_PIN.observe, decide=_decide_make, act=act)}}


def test_an_act_runs_only_from_the_before_state_and_is_observed_again(ledger, repository):
    commit = repository.branches["main"]
    refs = Refs({REPOSITORY: repository})
    make = _kind(lambda git, intent, observed: git.create_branch(intent.repository, intent.target_branch, commit))
    open_pending(ledger, "r1", branch="made")
    (result,) = effector(ledger, refs, **make).run_pending()
    assert result.outcome == "RunBasePinned.v1" and result.event.commit == commit
    assert refs.created == 1 and refs.observed == [(Path(REPOSITORY), "made")] * 2  # before and after the act
    open_pending(ledger, "r2", branch="made")  # the world is already in the "after" state: observed, not redone
    (again,) = effector(ledger, refs, **make).run_pending()
    assert again.outcome == "RunBasePinned.v1" and refs.created == 1


def test_an_act_that_leaves_the_world_unchanged_is_unknown_not_failed(ledger, repository):
    refs = Refs({REPOSITORY: repository})
    open_pending(ledger, "r1", branch="made")
    (result,) = effector(ledger, refs, **_kind(lambda git, intent, observed: None)).run_pending()
    assert result.unknown and "still shows the state before it" in result.reason
    assert ledger.get(run.apply, run.stream_of("r1")).status == "opening"
