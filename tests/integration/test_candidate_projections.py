"""Issue 8: the candidates and checks read models say exactly what the ledger recorded, and rebuild identically.

A real ledger gets a pin, a divergence, a release and a pin again, and check runs
through every result (passed, failed on its exit code, timed out, a launch that
failed and was then recorded as interrupted, an execution that could not be
made), each execution then removed. Every event is decided by the Candidate
aggregate itself, from the observations the effector would make; views caught
up after every step equal views rebuilt from position 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from docket.adapters.service_layer.use_cases import runs, tasks
from docket.adapters.service_layer.use_cases.candidates import load_candidate
from docket.adapters.service_layer.kernel.effector import Effector
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.projector import catch_up, open_views
from docket.adapters.world.clock import FixedClock
from docket.adapters.world.ledger.reader import ledger_reader
from docket.domain import candidate as aggregate
from docket.domain import check as candidate_check
from docket.domain import events as ev
from docket.domain import execution as candidate_execution
from docket.domain.effects import CandidateRefObservation, ExecutionObservation
from docket.domain.containment.processes import ProcessIdentity
from docket.domain.worker import LaunchObservation
from docket.projections import candidates, checks
from docket.projections.views import READ_MODELS

T0 = "2026-01-01T00:00:00.000Z"
PINNED, DIVERGED = "a1" * 32, "b2" * 32
HEAD, TREE, BASE, COMMIT, PLANTED = "1" * 40, "2" * 40, "3" * 40, "4b" * 20, "5" * 40
HELD = LaunchObservation("held", identity=ProcessIdentity("h", "boot", 4242, 4242, "99"),
                         supervisor=ProcessIdentity("h", "boot", 7, 7, "1"))
OUTPUT = dict(duration_ms=2_500, output_sha256="e" * 64, output_bytes=10)
ARTIFACT = {"path": "report.xml", "sha256": "f" * 64, "size": 3}


class Story:
    """One run's candidates, recorded in a real ledger a step at a time, each step decided by the aggregate."""

    def __init__(self, ledger: Ledger, clock: FixedClock, after_each: Callable[[], object]):
        self.ledger, self.clock, self.after_each, self.counter = ledger, clock, after_each, 0

    def _id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def decide(self, binding: str | None, step, made: bool = False) -> None:  # noqa: ANN001
        self.clock.advance(1_000)

        def decision(now: str) -> list[ev.Event]:
            existing = self.ledger.get(aggregate.apply, aggregate.stream_of(binding)) if binding else None
            decided = step(existing, now)
            decided = decided if isinstance(decided, list) else [decided]
            assert all(isinstance(e, ev.Event) for e in decided), decided
            return [aggregate.made(e) for e in decided] if made else decided

        self.ledger.decide(decision, self.clock.now())
        self.after_each()

    def _intent(self, c: aggregate.Candidate, intent_id: str | None) -> ev.Event:
        return next(e for _, e in self.ledger.history(aggregate.stream_of(c.binding_id))
                    if e.effect_role == "intent" and getattr(e, "intent_id", None) == intent_id)

    def request_pin(self, binding: str, changed: list[str]) -> None:
        self.decide(binding, lambda c, now: aggregate.request_pin(
            c, runs.load_run(self.ledger, "r1"), intent_id=self._id("pin"), task_id="t1", worker_id="w1",
            generation=1, boundary="generation-1", binding_id=binding, repository="/repo/.git",
            worktree="/repo/.git/docket/worktrees/r1/t1", ref=f"refs/docket/candidates/r1/{binding}", parent=HEAD,
            tree=TREE, base=BASE, changed_paths=changed, now=now))

    def observe_pin(self, binding: str, observed: CandidateRefObservation, made: bool = False) -> None:
        self.decide(binding, lambda c, now: aggregate.decide_pin(c, self._intent(c, c.pin_intent), observed, now),
                    made)

    def release(self, binding: str, observed: CandidateRefObservation = CandidateRefObservation("missing")) -> None:
        self.decide(binding, lambda c, now: aggregate.request_release(c, intent_id=self._id("release"),
                                                                      reason="done", now=now))
        self.decide(binding, lambda c, now: aggregate.decide_release(
            c, self._intent(c, c.release_intent), observed, now), made=True)

    def request_check(self, binding: str, check: str, *, required: bool = True) -> str:
        check_id = self._id(f"check-{check}")
        self.decide(binding, lambda c, now: candidate_check.request_check(
            c, runs.load_run(self.ledger, "r1"), check_id=check_id, execution_intent=self._id("execution"),
            check=check, config_sha256="c" * 64, argv_sha256="d" * 64, required=required, timeout_ms=60_000,
            idle_timeout_ms=None, execution_for=lambda n: f"/repo/.git/docket/executions/r1/{binding}/{check}-{n}",
            artifact_dir="out", now=now))
        return check_id

    def execution(self, binding: str, check_id: str, observed: ExecutionObservation, made: bool = False) -> None:
        self.decide(binding, lambda c, now: candidate_execution.decide_execution(
            c, self._intent(c, c.check_run(check_id).execution_intent), observed, now), made)

    def launch(self, binding: str, check_id: str, observed: LaunchObservation) -> None:
        self.decide(binding, lambda c, now: candidate_check.request_check_launch(
            c, check_id, intent_id=self._id("launch"), log_path="/logs/check.log", now=now))
        self.decide(binding, lambda c, now: candidate_check.decide_check_launch(
            c, self._intent(c, c.check_run(check_id).launch_intent), observed, now))

    def result(self, binding: str, check_id: str, result: str, **details) -> None:  # noqa: ANN003
        self.decide(binding, lambda c, now: candidate_check.check_result(c, check_id, result, now, **details))

    def interrupted(self, binding: str, check_id: str) -> None:
        self.decide(binding, lambda c, now: candidate_check.interrupted(c, check_id, "dead", now))

    def remove_execution(self, binding: str, check_id: str) -> None:
        self.decide(binding, lambda c, now: candidate_execution.request_removal(c, check_id, intent_id=self._id("rm"),
                                                                                now=now))
        self.decide(binding, lambda c, now: candidate_execution.decide_removal(
            c, self._intent(c, c.check_run(check_id).removal_intent), candidate_execution.RemovalObservation("absent"),
            now),
            made=True)

    def full_check(self, binding: str, check: str, result: str, **details) -> str:  # noqa: ANN003
        check_id = self.request_check(binding, check)
        self.execution(binding, check_id, ExecutionObservation("ready"), made=True)
        self.launch(binding, check_id, HELD)
        self.result(binding, check_id, result, **details)
        return check_id


def open_run(ledger: Ledger, clock: FixedClock, repo) -> None:  # noqa: ANN001
    runs.open_run(ledger, clock, run_id="r1", intent_id="i1", goal="g", target_branch="main", budget_ms=None,
                  repository=str(repo / ".git"))
    Effector(ledger, clock).run_pending()
    tasks.plan_task(ledger, clock, "r1", "t1", "title")


def rows(views) -> dict[str, list[tuple]]:  # noqa: ANN001
    return {m.TABLE: views.table_rows(m.TABLE) for m in READ_MODELS}


def test_the_rows_say_exactly_what_happened_and_a_rebuild_gives_identical_rows(repo, ledger_path, tmp_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    open_run(ledger, clock, repo)
    incremental = open_views(tmp_path / "incremental.sqlite")
    with ledger_reader(ledger_path) as reader:
        story = Story(ledger, clock, lambda: catch_up(reader, incremental))
        views = incremental.conn

        story.request_pin(PINNED, ["src/b.py", "src/a.py", "src/a.py", "é/ü.txt"])
        first_request, first_position = clock.now(), ledger.head()
        row = candidates.candidate_row(views, PINNED)
        assert row["status"] == "pinning" and row["commit"] is None and row["position"] == first_position
        story.observe_pin(PINNED, CandidateRefObservation("matching", commit=COMMIT), made=True)
        pinned_at = clock.now()

        story.request_pin(DIVERGED, ["x"])
        story.observe_pin(DIVERGED, CandidateRefObservation("diverged", commit=PLANTED, detail="another tree"))

        lint = story.full_check(PINNED, "lint", "passed", **OUTPUT, tail="ok\n\nall clean\n  \n", execution="matching",
                                artifacts=[ARTIFACT])
        assert checks.checks_of(views, PINNED)[0]["execution_state"] == "ready"
        story.remove_execution(PINNED, lint)
        lint_ended = next(e.recorded_at for _, e in ledger.history(aggregate.stream_of(PINNED))
                          if isinstance(e, ev.CheckPassed))
        test1 = story.request_check(PINNED, "test")
        story.execution(PINNED, test1, ExecutionObservation("ready"), made=True)
        story.launch(PINNED, test1, HELD)
        assert checks.checks_of(views, PINNED)[1]["status"] == "running"
        assert [r["check_id"] for r in checks.live_executions(views)] == [test1]
        assert [r["check_id"] for r in checks.unfinished(views)] == [test1]
        story.result(PINNED, test1, "failed", **OUTPUT, tail="x" * 300 + "\n", execution="matching", code="exit",
                     exit_code=2, message="exit 2")
        story.remove_execution(PINNED, test1)
        test2 = story.full_check(PINNED, "test", "timed-out", **OUTPUT, tail="", execution="matching",
                                 cause="idle-timeout")
        story.remove_execution(PINNED, test2)
        slow = story.request_check(PINNED, "slow")
        story.execution(PINNED, slow, ExecutionObservation("ready"), made=True)
        story.launch(PINNED, slow, LaunchObservation("failed", detail="no such file"))
        assert checks.checks_of(views, PINNED)[3]["status"] == "requested"  # a failed launch alone ends nothing
        story.interrupted(PINNED, slow)
        story.remove_execution(PINNED, slow)
        mutating = story.request_check(PINNED, "mut")
        story.execution(PINNED, mutating, ExecutionObservation("diverged", detail="a file is at the path"))
        story.interrupted(PINNED, mutating)
        assert [r["check_id"] for r in checks.live_executions(views)] == [mutating]
        story.remove_execution(PINNED, mutating)

        story.release(PINNED, CandidateRefObservation("diverged", commit=PLANTED))  # the ref moved: refused
        assert candidates.candidate_row(views, PINNED)["status"] == "pinned"
        assert candidates.candidate_row(views, PINNED)["released_at"] is None
        story.release(PINNED)
        assert candidates.candidate_row(views, PINNED)["status"] == "released"
        assert candidates.candidate_row(views, PINNED)["released_at"] == clock.now()
        story.request_pin(PINNED, ["src/b.py", "src/a.py", "é/ü.txt"])  # pinned again after its release
        again = clock.now()
        assert candidates.candidate_row(views, PINNED)["status"] == "pinning"
        assert candidates.candidate_row(views, PINNED)["commit"] is None
        story.observe_pin(PINNED, CandidateRefObservation("matching", commit=COMMIT))
        pinned_again = clock.now()
        assert pinned_again > pinned_at > first_request

        rebuilt = open_views(tmp_path / "rebuilt.sqlite")
        catch_up(reader, rebuilt)
    assert rows(incremental) == rows(rebuilt)
    assert incremental.position() == rebuilt.position() == ledger.head()
    views = rebuilt.conn

    common = dict(run_id="r1", task_id="t1", worker_id="w1", generation=1, boundary="generation-1", parent=HEAD,
                  tree=TREE, base=BASE, repository="/repo/.git", worktree="/repo/.git/docket/worktrees/r1/t1",
                  handoff=None, handoff_code=None)
    assert candidates.candidates_of(views, "r1") == [
        {**common, "binding_id": PINNED, "ref": f"refs/docket/candidates/r1/{PINNED}", "commit": COMMIT,
         "changed_count": 3, "changed_paths": '["src/a.py","src/b.py","é/ü.txt"]', "status": "pinned",
         "found": None, "requested_at": again, "pinned_at": pinned_again, "released_at": None,
         "position": first_position},
        {**common, "binding_id": DIVERGED, "ref": f"refs/docket/candidates/r1/{DIVERGED}", "commit": None,
         "changed_count": 1, "changed_paths": '["x"]', "status": "diverged", "found": PLANTED,
         "requested_at": candidates.candidate_row(views, DIVERGED)["requested_at"], "pinned_at": None,
         "released_at": None, "position": first_position + 2}]
    assert candidates.candidates_of(views, "r1", "t1") == candidates.candidates_of(views, "r1")
    assert candidates.candidates_of(views, "r1", "t2") == candidates.candidates_of(views, "r2") == []

    shown = [{k: r[k] for k in ("check_id", "check", "attempt", "required", "status", "code", "exit_code", "signal",
                                "execution_state", "pid", "duration_ms", "tail_line", "artifacts")}
             for r in checks.checks_of(views, PINNED)]
    assert shown == [
        dict(check_id=lint, check="lint", attempt=1, required=1, status="passed", code=None, exit_code=None,
             signal=None, execution_state="removed", pid=4242, duration_ms=2_500, tail_line="all clean",
             artifacts=1),
        dict(check_id=test1, check="test", attempt=1, required=1, status="failed", code="exit", exit_code=2,
             signal=None, execution_state="removed", pid=4242, duration_ms=2_500, tail_line="x" * 200, artifacts=0),
        dict(check_id=test2, check="test", attempt=2, required=1, status="timed-out", code="idle-timeout",
             exit_code=None, signal=None, execution_state="removed", pid=4242, duration_ms=2_500, tail_line=None,
             artifacts=0),
        dict(check_id=slow, check="slow", attempt=1, required=1, status="failed", code="interrupted",
             exit_code=None, signal=None, execution_state="removed", pid=None, duration_ms=None, tail_line=None,
             artifacts=0),
        dict(check_id=mutating, check="mut", attempt=1, required=1, status="failed", code="interrupted",
             exit_code=None, signal=None, execution_state="removed", pid=None, duration_ms=None, tail_line=None,
             artifacts=0)]
    lint_row = checks.checks_of(views, PINNED)[0]
    assert lint_row["binding_id"] == PINNED and lint_row["run_id"] == "r1" and lint_row["task_id"] == "t1"
    assert lint_row["config_sha256"] == "c" * 64 and lint_row["output_sha256"] == "e" * 64
    assert lint_row["execution"] == f"/repo/.git/docket/executions/r1/{PINNED}/lint-1"
    assert lint_row["ended_at"] == lint_ended and lint_row["requested_at"] < lint_ended
    assert checks.checks_of_run(views, "r1") == checks.checks_of(views, PINNED) == checks.executions(views)
    assert checks.live_executions(views) == checks.unfinished(views) == checks.checks_of(views, DIVERGED) == []
    assert candidates.all_candidates(views) == candidates.candidates_of(views, "r1")
    ledger.close()


def test_matching_finds_a_candidate_by_a_prefix_of_its_binding_id_or_commit(repo, ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    clock = FixedClock(T0)
    open_run(ledger, clock, repo)
    story = Story(ledger, clock, lambda: None)
    story.request_pin(PINNED, ["a"])
    story.observe_pin(PINNED, CandidateRefObservation("matching", commit=COMMIT))
    story.request_pin(DIVERGED, ["b"])
    views = open_views(":memory:")
    with ledger_reader(ledger_path) as reader:
        catch_up(reader, views)

    def found(key: str) -> list[str]:
        return [r["binding_id"] for r in candidates.matching(views.conn, key)]

    assert found(PINNED[:8]) == found(PINNED) == found(COMMIT[:8]) == found(COMMIT) == [PINNED]
    assert found(DIVERGED[:10]) == [DIVERGED]
    assert found("a1a1a1a2") == found("4b4b4b4c") == found("ffffffff") == []
    assert found("a1a1a1a1%") == found("a1a1a1a_") == found("A1A1A1A1") == found("") == []  # no patterns, no case
    assert candidates.candidate_row(views.conn, PINNED)["commit"] == COMMIT
    assert candidates.candidate_row(views.conn, "0" * 64) is None
    ledger.close()


def test_status_shows_each_tasks_latest_candidate_and_its_checks_without_heavy_imports(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("task", "plan", "r1", "--id", "t1", "--title", "title")
    ledger = Ledger(docket.ledger)
    clock = FixedClock("2099-01-01T00:00:00.000Z")  # after what the commands above recorded
    story = Story(ledger, clock, lambda: None)
    story.request_pin(PINNED, ["a", "b"])
    story.observe_pin(PINNED, CandidateRefObservation("matching", commit=COMMIT))
    story.full_check(PINNED, "lint", "passed", **OUTPUT, tail="", execution="matching")
    story.full_check(PINNED, "test", "failed", **OUTPUT, tail="", execution="matching", code="exit", exit_code=1)
    story.full_check(PINNED, "test", "passed", **OUTPUT, tail="", execution="matching")
    ledger.close()

    doc = docket("status", "r1", "--json").json()
    (task,) = doc["tasks"]
    assert task["task_id"] == "t1" and task["candidate"]["binding_id"] == PINNED
    assert task["candidate"]["commit"] == COMMIT and task["candidate"]["changed_count"] == 2
    assert "changed_paths" not in task["candidate"]
    assert [(c["check"], c["attempt"], c["status"]) for c in task["candidate"]["checks"]] == [
        ("lint", 1, "passed"), ("test", 1, "failed"), ("test", 2, "passed")]
    human = docket("status", "r1").stdout
    assert f"candidate {PINNED[:12]}: pinned, commit {COMMIT[:12]}, 2 changed path(s)" in human
    assert "check lint: passed\n" in human and "check test: passed, attempt 2" in human
    assert "check test: failed" not in human  # only the latest attempt of each check

    probe = ("import sys, io, contextlib\n"
             "from docket.cli.app import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    code = main(['status', 'r1', '--json'])\n"
             "heavy = {'pydantic', 'eventsourcing', 'dulwich', 'sqlite_utils', 'psutil', 'anyio'}\n"
             "print(code, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=docket.cwd, env=docket.env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "0 []"
    assert json.loads(docket("status", "--json").stdout)["runs"][0]["run_id"] == "r1"
