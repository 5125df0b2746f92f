"""The effector against a real repository: observe, decide, record exactly one outcome.

The same rules run against the in-memory fake in tests/unit/test_effector_rules.py;
the contract test here holds the fake to what the real inventory port reports.
"""

from __future__ import annotations

import multiprocessing
import shutil
from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel.effector import Effector
from tests.fakes.inventory import FakeInventory
from tests.fakes.repository import FakeRepository
from docket.adapters.world.git.inventory import DulwichInventory
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.ports import Ports
from docket.adapters.service_layer.use_cases.runs import load_run, open_run
from docket.adapters.world.clock import FixedClock
from docket.domain.events import IntentOutcomeUnknownV2, RunBasePinFailed, RunBasePinned

from ..conftest import git

T0 = "2026-01-01T00:00:00.000Z"


def open_pending(ledger: Ledger, repo: Path, run_id: str, branch: str = "main") -> None:
    open_run(ledger, FixedClock(T0), run_id=run_id, intent_id=f"i-{run_id}", goal="g",
             target_branch=branch, budget_ms=None, repository=str(repo / ".git"), wait=False)


def outcomes(ledger: Ledger, run_id: str) -> list:
    return [e for _, e in ledger.history(f"run:{run_id}") if getattr(e, "intent_id", None) and e.version > 2]


def test_pins_the_branch_commit_and_fails_an_unknown_branch(repo, ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    open_pending(ledger, repo, "r1")
    open_pending(ledger, repo, "r2", branch="no-such-branch")
    results = Effector(ledger, FixedClock(T0)).run_pending()
    assert [r.outcome for r in results] == ["RunBasePinned.v1", "RunBasePinFailed.v1"]
    (pinned,) = outcomes(ledger, "r1")
    assert isinstance(pinned, RunBasePinned) and pinned.commit == git(repo, "rev-parse", "main")
    (failed,) = outcomes(ledger, "r2")
    assert isinstance(failed, RunBasePinFailed) and failed.code == "unknown-branch"
    assert Effector(ledger, FixedClock(T0)).run_pending() == []  # nothing left, nothing redone
    ledger.close()


def test_unknown_is_recorded_then_observed_again_never_treated_as_failure(repo, ledger_path, tmp_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    open_pending(ledger, repo, "r1")
    moved = tmp_path / "elsewhere"
    shutil.move(repo, moved)
    clock = FixedClock(T0)
    effector = Effector(ledger, clock)
    (result,) = effector.run_pending()
    assert result.unknown and isinstance(result.event, IntentOutcomeUnknownV2)
    assert load_run(ledger, "r1").status == "opening"
    tracked = ledger.effector_cursor()
    shutil.move(moved, repo)
    clock.advance(1_000)  # its back-off has run out
    (result,) = effector.run_pending()
    assert result.outcome == "RunBasePinned.v1"
    assert ledger.effector_cursor() > tracked
    kinds = [type(e).__name__ for e in outcomes(ledger, "r1")]
    assert kinds == ["IntentOutcomeUnknownV2", "RunBasePinned"]
    ledger.close()


def _drive(path: str, start, now: str) -> None:
    ledger = Ledger(Path(path))
    start.wait()
    Effector(ledger, FixedClock(now)).run_pending()
    ledger.close()


@pytest.mark.slow
def test_racing_effectors_leave_exactly_one_outcome_per_intent(repo, ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    run_ids = [f"r{i}" for i in range(30)]
    for run_id in run_ids:
        open_pending(ledger, repo, run_id, branch="main" if int(run_id[1:]) % 3 else "missing")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_drive, args=(str(ledger_path), start, f"2026-01-01T00:00:0{i}.000Z"))
             for i in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    for run_id in run_ids:
        assert len(outcomes(ledger, run_id)) == 1, run_id
    last_intent = max(p for r in run_ids for p, e in ledger.history(f"run:{r}")
                      if e.type_name() == "RunBasePinRequested.v1")
    assert ledger.effector_cursor() == ledger.head()  # nothing pending: the cursor is at the head
    assert last_intent < ledger.head()
    ledger.close()


def test_branches_are_read_from_packed_refs_and_linked_worktrees(repo, tmp_path):
    from docket.adapters.world.git.repository import observe_branch

    git(repo, "branch", "feature")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "feature").exists()
    observed = observe_branch(repo / ".git", "feature")
    assert observed.status == "found" and observed.commit == git(repo, "rev-parse", "feature")
    assert observe_branch(repo / ".git", "nope").status == "missing"
    assert observe_branch(tmp_path / "not-a-repo", "main").status == "unreadable"


def test_an_effector_that_loses_the_race_records_nothing(repo, ledger_path):
    """A observes; before A records, B drives the same intent to its outcome. A's write must lose."""
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    open_pending(ledger, repo, "r1")
    winner = Effector(Ledger(ledger_path), FixedClock("2026-01-01T00:00:01.000Z"))

    class Overtaken(DulwichInventory):
        overtaken = False

        def observe_branch(self, repository, branch):
            observation = super().observe_branch(repository, branch)  # observed...
            if not self.overtaken:
                self.overtaken = True
                assert [r.outcome for r in winner.run_pending()] == ["RunBasePinned.v1"]  # ...but B records first
            return observation

    loser = Effector(ledger, FixedClock("2026-01-01T00:00:02.000Z"), Ports(inventory=Overtaken()))
    (result,) = loser.run_pending()
    assert result.outcome == "already-resolved" and result.position is None
    (pinned,) = outcomes(ledger, "r1")
    assert pinned.recorded_at == "2026-01-01T00:00:01.000Z"  # the winner's outcome, and only it
    assert ledger.effector_cursor() == ledger.head() == 4  # genesis, opened, intent, outcome
    winner.ledger.close()
    ledger.close()


def test_a_ref_naming_a_blob_is_a_failure_and_one_unknown_holds_no_other_intent_back(repo, ledger_path, tmp_path):
    """Reproduced before the fix: a branch naming a blob left `run open` unknown, and every
    later intent of every other run stayed pending behind it."""
    blob = git(repo, "hash-object", "-w", "README.md")
    (repo / ".git" / "refs" / "heads" / "blob").write_text(blob + "\n")  # git itself refuses to write this
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    open_pending(ledger, repo, "blob", branch="blob")
    open_run(ledger, FixedClock(T0), run_id="gone", intent_id="i-gone", goal="g", target_branch="main",
             budget_ms=None, repository=str(tmp_path / "no-such-repo" / ".git"), wait=False)
    open_pending(ledger, repo, "later")
    results = {r.intent_id: r for r in Effector(ledger, FixedClock(T0)).run_pending()}
    assert results["i-blob"].outcome == "RunBasePinFailed.v1"
    assert results["i-blob"].event.code == "branch-not-a-commit"
    assert results["i-gone"].unknown  # the world cannot be read: unknown...
    assert results["i-later"].outcome == "RunBasePinned.v1"  # ...and it holds the later intent not back
    ledger.close()


def test_a_stuck_intent_is_not_recorded_again_on_every_pass(repo, ledger_path, tmp_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    open_run(ledger, FixedClock(T0), run_id="gone", intent_id="i-gone", goal="g", target_branch="main",
             budget_ms=None, repository=str(tmp_path / "no-such-repo" / ".git"), wait=False)
    clock = FixedClock(T0)
    effector = Effector(ledger, clock)
    head = None
    outcomes_seen = []
    for _ in range(50):  # fifty passes within one second: one record, then back-off
        outcomes_seen += [r.outcome for r in effector.run_pending()]
        head = head or ledger.head()
    assert ledger.head() == head
    assert outcomes_seen[0] == "IntentOutcomeUnknown.v2" and set(outcomes_seen[1:]) == {"backing-off"}
    forced = effector.run_pending(force=True)  # observed again on demand: same reason, nothing recorded
    assert [r.outcome for r in forced] == ["still-unknown"] and ledger.head() == head
    clock.advance(1_000)
    (again,) = effector.run_pending()
    assert again.outcome == "IntentOutcomeUnknown.v2" and again.event.observations == 2
    (pending,) = ledger.pending_intents(after=0)
    assert pending.intent.intent_id == "i-gone" and pending.last_unknown.observations == 2
    ledger.close()


def test_an_intent_against_another_repository_is_not_driven(repo, ledger_path, tmp_path):
    """A ledger bound to one repository observes no other (an intent naming another's path stays unknown)."""
    from docket.adapters.world.ledger.identity import ensure_identity

    other = tmp_path / "other"
    git(tmp_path, "init", "-q", "-b", "main", str(other))
    (other / "f").write_text("x")
    git(other, "add", "f")
    git(other, "commit", "-q", "-m", "x")
    ledger = Ledger(ledger_path)
    ledger.initialise(T0, ensure_identity(repo / ".git"), str(repo / ".git"))
    ensure_identity(other / ".git")
    open_run(ledger, FixedClock(T0), run_id="r1", intent_id="i1", goal="g", target_branch="main",
             budget_ms=None, repository=str(other / ".git"), wait=False)
    (result,) = Effector(ledger, FixedClock(T0)).run_pending()
    assert result.unknown and "belongs to repository" in result.reason
    assert load_run(ledger, "r1").base_commit is None
    ledger.close()


def _real_world(repo: Path, tmp_path: Path):
    from docket.adapters.world.ledger.identity import ensure_identity

    git(repo, "branch", "feature")
    blob = git(repo, "hash-object", "-w", "README.md")
    (repo / ".git" / "refs" / "heads" / "blob").write_text(blob + "\n")
    return DulwichInventory(), repo / ".git", ensure_identity(repo / ".git"), tmp_path / "nowhere" / ".git"


def _fake_world(repo: Path, tmp_path: Path):
    fake = FakeRepository(identity="repo-" + "a" * 32)
    fake.point("main")
    fake.point("feature")
    fake.point("blob", "blob")
    common = tmp_path / "fake" / ".git"
    return FakeInventory({common: fake}), common, fake.identity, tmp_path / "nowhere" / ".git"


@pytest.mark.parametrize("world", [_real_world, _fake_world], ids=["dulwich", "fake"])
def test_the_fake_git_port_keeps_the_real_ones_promises(world, repo, tmp_path):
    port, common, identity, nowhere = world(repo, tmp_path)
    assert port.identity(common) == identity and port.identity(nowhere) is None
    found = port.observe_branch(common, "feature")
    assert found.status == "found" and len(found.commit) == 40
    assert port.observe_branch(common, "main").commit != port.observe_branch(common, "blob").commit
    assert port.observe_branch(common, "no-such-branch").status == "missing"
    not_a_commit = port.observe_branch(common, "blob")
    assert not_a_commit.status == "not-a-commit" and not_a_commit.detail == "refs/heads/blob names a blob"
    unreadable = port.observe_branch(nowhere, "main")
    assert unreadable.status == "unreadable" and unreadable.detail.startswith(f"cannot open repository {nowhere}")


def test_a_recorded_repository_not_here_is_acted_on_in_this_hosts_own_clone(tmp_path):
    """Effector.local: this host's clone of the ledger's repository (home) when that one is; else the recorded path,
    whose mismatch the ports report. Never another repository, and never another host's clone of it, even where
    its path can be reached (two hosts on one machine: beta acting in alpha's clone once shared alpha's pool of
    check executions, which failed its checks)."""
    from docket.adapters.service_layer.kernel.effector import Effector
    from docket.adapters.service_layer.kernel.ledger import Ledger
    from docket.adapters.world.clock import FixedClock
    from docket.adapters.world.ledger.identity import adopt_identity
    from tests.conftest import make_repo

    identity = "repo-" + "a" * 32
    here, other_clone, stranger = (make_repo(tmp_path / name) / ".git" for name in ("here", "other", "stranger"))
    for clone in (here, other_clone):
        adopt_identity(clone, identity)
    adopt_identity(stranger, "repo-" + "b" * 32)
    ledger = Ledger(Path(":memory:"))
    ledger.initialise("2026-01-01T00:00:00.000Z", identity, str(here))
    try:
        effector = Effector(ledger, FixedClock("2026-01-01T00:00:00.000Z"), home=here)
        assert effector.local(str(other_clone)) == here  # another clone of it, reachable here: this host's own
        assert effector.local(str(here)) == here
        assert effector.local(str(tmp_path / "gone" / ".git")) == here  # recorded on another machine: this clone
        assert effector.local(str(stranger)) == here  # another repository at that path here: never acted on
        homeless = Effector(ledger, FixedClock("2026-01-01T00:00:00.000Z"), home=stranger)
        assert homeless.local(str(tmp_path / "gone" / ".git")) == tmp_path / "gone" / ".git"  # no clone of it here
    finally:
        ledger.close()
