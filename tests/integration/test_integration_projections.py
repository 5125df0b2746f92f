"""Issue 9: the integrations, integration_steps and approvals read models say what the ledger recorded, follow the
Integration aggregate's status at every event, and rebuild identically.

Real ledgers get runs whose integrations go every way: approved, prepared,
merged and re-verified to a completed target (an intent cancelled and asked
again on the way, the target found checked out and then moved), sealed; stopped
by a conflict, a rejected re-verification, an integration ref moved outside
docket, and a target moved by someone else. Every event is decided by the
aggregate itself; views caught up after each event equal views rebuilt from
position 1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.projector import catch_up, open_views
from docket.adapters.world.clock import FixedClock
from docket.adapters.world.ledger.reader import ledger_reader
from docket.domain import events as ev
from docket.domain.merge_queue import integration as aggregate
from docket.domain.merge_queue import target_move
from docket.domain.aggregate import next_event
from docket.domain.effects import IntegrationObservation
from docket.domain.run import Run
from docket.projections import approvals, integration_steps, integrations
from docket.projections.views import READ_MODELS

T0 = "2026-01-01T00:00:00.000Z"
EXPECTED, CANDIDATE, MERGE1, MERGE2, TREE, OTHER = "1" * 40, "2" * 40, "3" * 40, "4" * 40, "5" * 40, "6" * 40
B1, B2 = "b1" * 32, "b2" * 32


def run(run_id: str) -> Run:
    return Run(run_id=run_id, version=3, goal="g", target_branch="release", budget_ms=None, status="active",
               opened_at=T0, base_commit=EXPECTED)


def steps(*bindings: str) -> list[ev.IntegrationStep]:
    return [ev.IntegrationStep(task_id=f"t{n}", binding_id=b, commit=CANDIDATE, worker_id=f"w{n}", generation=n)
            for n, b in enumerate(bindings, start=1)]


class Story:
    """Integrations recorded in a real ledger one decision at a time; after each, the views catch up and the row's
    status is the aggregate's."""

    def __init__(self, ledger: Ledger, clock: FixedClock, views, reader):  # noqa: ANN001
        self.ledger, self.clock, self.views, self.reader = ledger, clock, views, reader

    def state(self, run_id: str) -> aggregate.Integration | None:
        return self.ledger.get(aggregate.apply, aggregate.stream_of(run_id))

    def decide(self, run_id: str, step: Callable[[aggregate.Integration | None, str], object],
               made: bool = False) -> None:
        self.clock.advance(1_000)

        def decision(now: str) -> list[ev.Event]:
            decided = step(self.state(run_id), now)
            decided = decided if isinstance(decided, list) else [decided]
            assert all(isinstance(e, ev.Event) for e in decided), decided
            return [aggregate.made(e) for e in decided] if made else decided

        self.ledger.decide(decision, self.clock.now())
        catch_up(self.reader, self.views)
        assert self.row(run_id)["status"] == self.state(run_id).status

    def row(self, run_id: str) -> dict:
        return integrations.integration_of(self.views.conn, run_id)

    def steps(self, run_id: str) -> list[dict]:
        return integration_steps.steps_of(self.views.conn, run_id)

    def intent(self, run_id: str, intent_id: str) -> ev.Event:
        return next(e for _, e in self.ledger.history(aggregate.stream_of(run_id))
                    if getattr(e, "intent_id", None) == intent_id and e.effect_role == "intent")

    # the steps of a story, each one decision
    def approve(self, run_id: str, by: str, *candidates: tuple[str, str, str]) -> None:
        self.decide(run_id, lambda i, now: aggregate.record_approval(i, run(run_id), by=by, candidates=candidates,
                                                                     now=now))

    def prepare(self, run_id: str, *bindings: str, approval: bool = False) -> None:
        self.decide(run_id, lambda i, now: aggregate.prepare(
            i, run(run_id), repository="/repo/.git", target_branch="release", expected_commit=EXPECTED,
            integration_ref=f"refs/docket/integrations/{run_id}", steps=steps(*bindings), required_checks=[],
            overlaps=[], approval_required=approval, now=now))

    def request(self, run_id: str, number: int, intent_id: str, head: str, merge_commit: str,
                merge: str = "merged") -> None:
        self.decide(run_id, lambda i, now: aggregate.request_step(
            i, number, intent_id=intent_id, head=head, merge_commit=merge_commit, tree=TREE, merge=merge, now=now))

    def observe(self, run_id: str, intent_id: str, observed: IntegrationObservation, made: bool = False) -> None:
        self.decide(run_id, lambda i, now: aggregate.decide_step(i, self.intent(run_id, intent_id), observed, now),
                    made)

    def cancel(self, run_id: str, intent_id: str) -> None:
        self.decide(run_id, lambda i, now: next_event(ev.IntentCancelled, aggregate.stream_of(run_id), i.version, now,
                                                      intent_id=intent_id, reason="given up"))

    def verify(self, run_id: str, number: int) -> None:
        check = ev.CheckBinding(check="ok", check_id=f"c{number}", config_sha256="c" * 64, output_sha256=None)
        self.decide(run_id, lambda i, now: aggregate.verified(i, number, verification_binding="9" * 64,
                                                              tree=TREE, checks=[check], now=now))

    def target(self, run_id: str, intent_id: str, observed: target_move.TargetObservation, made: bool = False) -> None:
        self.decide(run_id, lambda i, now: target_move.request_target(i, intent_id=intent_id, now=now))
        self.decide(run_id, lambda i, now: target_move.decide_target(i, self.intent(run_id, intent_id), observed, now),
                    made)


def rows(views) -> dict[str, list[tuple]]:  # noqa: ANN001
    return {m.TABLE: views.table_rows(m.TABLE) for m in READ_MODELS}


def test_the_rows_follow_the_aggregate_and_a_rebuild_gives_identical_rows(ledger_path: Path, tmp_path: Path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    incremental = open_views(tmp_path / "incremental.sqlite")
    with ledger_reader(ledger_path) as reader:
        story = Story(ledger, clock, incremental, reader)
        c = incremental.conn

        # r1: approved twice, merged and re-verified, the target found checked out, then moved: completed and sealed
        assert story.row("r1")["status"] == "unprepared" and story.row("r1")["steps"] == 0  # nothing recorded yet
        story.approve("r1", "Ada", ("t2", B2, CANDIDATE))
        approved_at = clock.now()
        story.approve("r1", "Grace Hopper", ("t1", B1, CANDIDATE), ("t2", B2, CANDIDATE))
        assert [(a["by"], a["task_ids"], a["binding_ids"], a["candidates"]) for a in approvals.approvals_of(c, "r1")] \
            == [("Ada", ["t2"], [B2], 1), ("Grace Hopper", ["t1", "t2"], [B1, B2], 2)]
        assert approvals.approvals_of(c, "r1")[0]["recorded_at"] == approved_at
        assert story.row("r1")["approvals"] == 2 and story.row("r1")["status"] == "unprepared"
        story.prepare("r1", B1, B2, approval=True)
        row = story.row("r1")
        assert (row["status"], row["steps"], row["target_branch"], row["expected_commit"], row["prepared_at"]) == (
            "merging", 2, "release", EXPECTED, clock.now())
        assert [(s["step"], s["task_id"], s["binding_id"], s["worker_id"], s["generation"], s["status"])
                for s in story.steps("r1")] == [(1, "t1", B1, "w1", 1, "waiting"), (2, "t2", B2, "w2", 2, "waiting")]
        story.request("r1", 1, "s1", EXPECTED, MERGE1)
        assert story.steps("r1")[0]["status"] == "merging" and story.steps("r1")[0]["intent_id"] == "s1"
        story.cancel("r1", "s1")
        assert (story.steps("r1")[0]["status"], story.steps("r1")[0]["intent_id"]) == ("waiting", None)
        story.request("r1", 1, "s1b", EXPECTED, MERGE1)
        story.observe("r1", "s1b", IntegrationObservation("merged", commit=MERGE1), made=True)  # after the act
        step = story.steps("r1")[0]
        assert (step["status"], step["merge_commit"], step["merge"], step["result"]) == (
            "merged", MERGE1, "merged", "created")
        assert (story.row("r1")["status"], story.row("r1")["steps_merged"]) == ("verifying", 1)
        story.verify("r1", 1)
        assert (story.row("r1")["steps_merged"], story.row("r1")["steps_verified"]) == (0, 1)
        assert story.steps("r1")[0]["verification_binding"] == "9" * 64
        story.request("r1", 2, "s2", MERGE1, MERGE1, merge="already-merged")
        story.observe("r1", "s2", IntegrationObservation("merged", commit=MERGE1))
        assert story.steps("r1")[1]["result"] == "observed"
        story.verify("r1", 2)
        assert story.row("r1")["status"] == "updating-target"
        story.target("r1", "g1", target_move.TargetObservation("found", commit=EXPECTED, checked_out="/home/u/repo"))
        row = story.row("r1")
        assert (row["status"], row["target"], row["target_code"], row["ended_at"]) == (
            "updating-target", None, "target-checked-out", None)
        story.target("r1", "g2", target_move.TargetObservation("found", commit=MERGE1), made=True)  # after the act
        row = story.row("r1")
        assert (row["status"], row["final_commit"], row["final_tree"], row["ended_at"]) == (
            "completed", MERGE1, TREE, clock.now())
        story.decide("r1", lambda i, now: aggregate.seal(i, receipt={"run": "r1"}, receipt_sha256="e" * 64,
                                                         ledger_position=5, ledger_digest="d" * 64,
                                                         merkle_root="f" * 64, cited_positions=[1], now=now))
        assert (story.row("r1")["receipt_sha256"], story.row("r1")["sealed_position"]) == ("e" * 64, ledger.head())

        # r2: the first step conflicts
        story.prepare("r2", B1)
        story.decide("r2", lambda i, now: aggregate.conflicted(i, 1, head=EXPECTED, reason="conflicted",
                                                               paths=["a.txt", "b/c.txt"], message="both changed",
                                                               now=now))
        row, (step,) = story.row("r2"), story.steps("r2")
        assert (row["status"], row["stopped_step"], row["stop_code"]) == ("stopped", 1, "conflicted")
        assert (step["status"], step["code"], step["paths"], step["head"]) == (
            "conflicted", "conflicted", '["a.txt","b/c.txt"]', EXPECTED)

        # r3: the second step's re-verification is rejected
        story.prepare("r3", B1, B2)
        story.request("r3", 1, "r3s1", EXPECTED, MERGE1)
        story.observe("r3", "r3s1", IntegrationObservation("merged", commit=MERGE1))
        story.verify("r3", 1)
        story.request("r3", 2, "r3s2", MERGE1, MERGE2)
        story.observe("r3", "r3s2", IntegrationObservation("merged", commit=MERGE2))
        story.decide("r3", lambda i, now: aggregate.rejected(i, 2, verification_binding="8" * 64, check="ok",
                                                             check_id="c9", code="check-failed", message="exit 1",
                                                             now=now))
        row = story.row("r3")
        assert (row["status"], row["stopped_step"], row["stop_code"], row["steps_merged"], row["steps_verified"]) == (
            "stopped", 2, "check-failed", 0, 1)
        assert (story.steps("r3")[1]["status"], story.steps("r3")[1]["check"]) == ("rejected", "ok")

        # r4: the integration ref was moved outside docket
        story.prepare("r4", B1)
        story.request("r4", 1, "r4s1", EXPECTED, MERGE1)
        story.observe("r4", "r4s1", IntegrationObservation("diverged", commit=OTHER))
        assert (story.row("r4")["status"], story.row("r4")["stop_code"]) == ("stopped", "integration-ref-moved")
        assert story.steps("r4")[0]["status"] == "failed"

        # r5: the target moved by someone else
        story.prepare("r5", B1)
        story.request("r5", 1, "r5s1", EXPECTED, MERGE1)
        story.observe("r5", "r5s1", IntegrationObservation("merged", commit=MERGE1))
        story.verify("r5", 1)
        story.target("r5", "r5g", target_move.TargetObservation("found", commit=OTHER))
        row = story.row("r5")
        assert (row["status"], row["target"], row["target_code"], row["final_commit"]) == (
            "stopped", "moved", "target-moved", None)

        assert sorted(integrations.all_integrations(c)) == ["r1", "r2", "r3", "r4", "r5"]
        rebuilt = open_views(tmp_path / "rebuilt.sqlite")
        catch_up(reader, rebuilt)
        assert rows(rebuilt) == rows(incremental)
        assert rows(incremental)["integration_steps"] and rows(incremental)["approvals"]


def test_a_batched_queue_s_rows_follow_the_aggregate_through_a_bisection(ledger_path: Path, tmp_path: Path):
    """[integration] batch: four steps merged one on top of the other, their check fails, the bisection verifies the
    first, rejects the second and queues the last two again; each view row follows the aggregate, and rebuilds."""
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    incremental = open_views(tmp_path / "incremental.sqlite")
    merges = ["a%039d" % n for n in range(1, 7)]
    bindings = ["%02d" % n * 32 for n in range(1, 5)]
    with ledger_reader(ledger_path) as reader:
        story = Story(ledger, clock, incremental, reader)
        story.decide("b1", lambda i, now: aggregate.open_queue(
            i, run("b1"), repository="/repo/.git", target_branch="release", expected_commit=EXPECTED,
            integration_ref="refs/docket/integrations/b1", required_checks=[], now=now))
        for step in steps(*bindings):
            story.decide("b1", lambda i, now, step=step: aggregate.queue_step(i, run("b1"), step, waiting_for=[],
                                                                               overlaps=[], now=now))

        def merge(number: int) -> None:
            head = story.state("b1").ref_from()
            story.decide("b1", lambda i, now: aggregate.request_step(
                i, number, intent_id=f"s{number}", head=head, merge_commit=merges[number - 1], tree=TREE,
                merge="merged", now=now, batch_size=4))
            story.observe("b1", f"s{number}", IntegrationObservation("merged", commit=merges[number - 1]))

        def failed(first: int, last: int) -> None:
            story.decide("b1", lambda i, now: aggregate.batch_failed(
                i, first, last, verification_binding="8" * 64, tree=TREE, check="ok", check_id=f"c{last}",
                code="exit", message="exit 1", now=now))

        for number in range(1, 5):
            merge(number)
        assert story.row("b1")["steps_merged"] == 4
        failed(1, 4)
        assert [s["bisect"] for s in story.steps("b1")] == ["check ok failed on steps 1..4 together: bisecting"] * 4
        failed(1, 2)
        story.verify("b1", 1)
        story.decide("b1", lambda i, now: aggregate.rejected(i, 2, verification_binding="7" * 64, check="ok",
                                                             check_id="c2", code="exit", message="exit 1", now=now))
        story.decide("b1", lambda i, now: aggregate.requeue_after(i, 2, now))
        assert [(s["step"], s["status"]) for s in story.steps("b1")] == [
            (1, "verified"), (2, "rejected"), (3, "requeued"), (4, "requeued"), (5, "waiting"), (6, "waiting")]
        assert [s["task_id"] for s in story.steps("b1")[4:]] == ["t3", "t4"]
        merge(5)
        merge(6)
        story.decide("b1", lambda i, now: aggregate.batch_verified(
            i, 5, 6, verification_binding="6" * 64, tree=TREE, checks=[], now=now))
        assert [(s["step"], s["status"], s["batch"]) for s in story.steps("b1")[4:]] == [
            (5, "verified", "5..6"), (6, "verified", "5..6")]
        row = story.row("b1")
        assert (row["steps"], row["steps_merged"], row["steps_verified"], row["steps_dropped"]) == (6, 0, 3, 3)
        rebuilt = open_views(tmp_path / "rebuilt.sqlite")
        catch_up(reader, rebuilt)
        assert rows(rebuilt) == rows(incremental)
