"""The Candidate aggregate decided on plain values: the pin, its release, and a check run's every step."""

from __future__ import annotations

import pytest

from docket.domain import candidate
from docket.domain import events as ev
from docket.domain.check import (check_result, concluded, decide_check_launch, interrupted, request_check,
                                 request_check_launch)
from docket.domain.effects import Act, CandidateRefObservation, ExecutionObservation, TargetHistory, Unknown
from docket.domain.kernel.errors import Refused
from docket.domain.execution import RemovalObservation, decide_execution, decide_removal, request_removal
from docket.domain.handoff import confirm_handoff, offer_handoff
from docket.domain.containment.processes import ProcessIdentity
from docket.domain.worker import LaunchObservation

from .builders import COMMIT, T0, Book, at

BINDING = "b" * 64
TREE, PARENT, PINNED = "c" * 40, "d" * 40, "e" * 40
REF = f"refs/docket/candidates/r1/{BINDING}"
CHECK_PROCESS = ProcessIdentity(host="h", boot_id="b", pid=200, pgid=200, start_time="9")
ME = ProcessIdentity(host="h", boot_id="b", pid=99, pgid=99, start_time="4")


def pin_request(book: Book, existing=None, r=None, intent_id="p1", now=T0):
    r = r or book.active_run()
    return candidate.request_pin(existing, r, intent_id=intent_id, task_id="t1", worker_id="t1", generation=1,
                                 boundary="generation-1", binding_id=BINDING, repository="/repo/.git",
                                 worktree="/repo/.git/docket/worktrees/r1/t1", ref=REF, parent=PARENT, tree=TREE,
                                 base=COMMIT, changed_paths=["b.txt", "a.txt", "a.txt"], now=now)


def pinned(book: Book):
    (intent,) = pin_request(book)
    c = book.apply(candidate.apply, None, intent)
    outcome = candidate.decide_pin(c, intent, CandidateRefObservation("matching", commit=PINNED), at(1))
    return book.apply(candidate.apply, c, candidate.made(outcome)), intent


def test_a_pin_request_names_the_capture_with_sorted_unique_paths_on_the_binding_stream():
    (intent,) = pin_request(Book())
    assert intent.stream == f"candidate:{BINDING}" and intent.version == 1
    assert intent.changed_paths == ["a.txt", "b.txt"]


def test_the_same_capture_pinned_twice_is_one_candidate():
    book = Book()
    c, _ = pinned(book)
    assert c.status == "pinned" and c.commit == PINNED
    assert pin_request(book, existing=c) == []
    pinning = book.apply(candidate.apply, None, pin_request(book))
    assert pin_request(book, existing=pinning) == []


def test_the_pin_is_decided_by_what_the_ref_holds():
    book = Book()
    (intent,) = pin_request(book)
    c = book.apply(candidate.apply, None, intent)
    assert isinstance(candidate.decide_pin(c, intent, CandidateRefObservation("missing"), at(1)), Act)
    observed = candidate.decide_pin(c, intent, CandidateRefObservation("matching", commit=PINNED), at(1))
    assert isinstance(observed, ev.CandidatePinned) and observed.result == "observed"
    assert observed.changed_paths == ["a.txt", "b.txt"] and observed.base == COMMIT
    assert candidate.made(observed).result == "created"
    diverged = candidate.decide_pin(c, intent, CandidateRefObservation("diverged", commit="f" * 40,
                                                                      detail="tree differs"), at(1))
    assert isinstance(diverged, ev.CandidateDiverged) and diverged.found == "f" * 40
    unknown = candidate.decide_pin(c, intent, CandidateRefObservation("unreadable", detail="locked"), at(1))
    assert isinstance(unknown, Unknown) and unknown.reason == "locked"


def test_a_diverged_candidate_is_not_pinned_again_and_cannot_be_checked():
    book = Book()
    (intent,) = pin_request(book)
    c = book.apply(candidate.apply, None, intent)
    c = book.apply(candidate.apply, c, candidate.decide_pin(c, intent, CandidateRefObservation("diverged"), at(1)))
    assert c.status == "diverged"
    with pytest.raises(Refused) as e:
        pin_request(book, existing=c)
    assert e.value.code == "candidate-diverged"
    with pytest.raises(Refused) as e:
        start_check(book, c)
    assert e.value.code == "candidate-not-pinned"


def test_a_pin_in_a_closed_run_is_refused():
    from docket.domain import run

    book = Book()
    r = book.active_run()
    r = book.apply(run.apply, r, run.abort(r, "enough", at(1)))
    with pytest.raises(Refused) as e:
        pin_request(book, r=r)
    assert e.value.code == "run-closed"


def test_release_is_a_compare_and_swap_from_the_pinned_commit():
    book = Book()
    c, _ = pinned(book)
    (intent,) = candidate.request_release(c, intent_id="r1", reason="done", now=at(2))
    assert (intent.commit, intent.parent, intent.tree) == (PINNED, PARENT, TREE)
    c = book.apply(candidate.apply, c, intent)
    assert candidate.request_release(c, intent_id="r2", reason="again", now=at(2)) == []
    assert isinstance(candidate.decide_release(c, intent, CandidateRefObservation("matching", commit=PINNED), at(3)),
                      Act)
    gone = candidate.decide_release(c, intent, CandidateRefObservation("missing"), at(3))
    assert isinstance(gone, ev.CandidateReleased) and candidate.made(gone).result == "released"
    moved = candidate.decide_release(c, intent, CandidateRefObservation("diverged", commit="f" * 40), at(3))
    assert isinstance(moved, ev.CandidateReleaseFailed) and moved.code == "candidate-diverged"
    other = candidate.decide_release(c, intent, CandidateRefObservation("matching", commit="f" * 40), at(3))
    assert isinstance(other, ev.CandidateReleaseFailed)
    assert book.apply(candidate.apply, c, other).status == "pinned"
    released = book.apply(candidate.apply, c, gone)
    assert released.status == "released"
    assert candidate.request_release(released, intent_id="r3", reason="x", now=at(4)) == []


def test_the_target_preserves_a_candidate_whose_commit_or_tree_on_its_parent_it_reaches():
    c, _ = pinned(Book())
    tip, other_tree = "1" * 40, "2" * 40

    def history(*commits: tuple[str, str, tuple[str, ...]], complete: bool = True) -> TargetHistory:
        return TargetHistory("trunk", tip, {oid: (tree, parents) for oid, tree, parents in commits}, complete)

    merged = history((tip, other_tree, (PARENT, PINNED)), (PINNED, TREE, (PARENT,)), (PARENT, other_tree, ()))
    assert candidate.preserved_by_target(c, merged) == (True, f"its commit {PINNED[:12]} is in the history of trunk")
    recommitted = history((tip, TREE, (PARENT,)), (PARENT, other_tree, ()))  # the same change, committed again
    kept, why = candidate.preserved_by_target(c, recommitted)
    assert kept and tip[:12] in why
    empty = history((tip, other_tree, (PARENT,)), (PARENT, TREE, ()))  # it changes nothing on a reachable parent
    kept, why = candidate.preserved_by_target(c, empty)
    assert kept and "changes nothing" in why
    elsewhere = history((tip, TREE, ("3" * 40,)), (PARENT, other_tree, ()))  # its tree on another parent: not it
    assert candidate.preserved_by_target(c, elsewhere) == (False, f"its commit {PINNED[:12]} is not in the history "
                                                                  "of trunk")
    kept, why = candidate.preserved_by_target(c, history((tip, other_tree, (PARENT,)), complete=False))
    assert not kept and "not among the 1 commits" in why
    assert candidate.preserved_by_target(c, TargetHistory("trunk", None, {}, True)) == (
        False, "the target trunk does not exist")
    never = book_candidate_never_pinned()
    assert candidate.preserved_by_target(never, merged)[0] is False


def book_candidate_never_pinned():
    book = Book()
    (intent,) = pin_request(book)
    return book.apply(candidate.apply, None, intent)


def start_check(book: Book, c, check="tests", check_id="k1", execution_intent="x1"):
    return request_check(c, book.active_run(), check_id=check_id, execution_intent=execution_intent,
                         check=check, config_sha256="1" * 64, argv_sha256="2" * 64, required=True,
                         timeout_ms=60_000, idle_timeout_ms=None,
                         execution_for=lambda attempt: f"/repo/.git/docket/executions/r1/{BINDING}/"
                                                       f"{check}-{attempt}",
                         artifact_dir="out", now=at(5))


def test_attempts_are_numbered_per_check_on_the_candidate_stream():
    book = Book()
    c, _ = pinned(book)
    first = start_check(book, c)
    assert [type(e) for e in first] == [ev.CheckRequested, ev.ExecutionRequested]
    assert first[0].attempt == 1 and first[1].version == first[0].version + 1
    assert first[1].path.endswith("/tests-1") and first[1].commit == PINNED
    c = book.apply(candidate.apply, c, first)
    second = start_check(book, c, check_id="k2", execution_intent="x2")
    assert second[0].attempt == 2 and second[1].path.endswith("/tests-2")
    other = start_check(book, c, check="lint", check_id="k3", execution_intent="x3")
    assert other[0].attempt == 1


def launched_check(book: Book):
    c, _ = pinned(book)
    requested, execution = start_check(book, c)
    c = book.apply(candidate.apply, c, [requested, execution])
    made = decide_execution(c, execution, ExecutionObservation("ready"), at(6))
    assert isinstance(made, ev.ExecutionCreated) and candidate.made(made).result == "created"
    c = book.apply(candidate.apply, c, made)
    launch = request_check_launch(c, "k1", intent_id="l1", log_path="/log", now=at(7))
    c = book.apply(candidate.apply, c, launch)
    held = LaunchObservation("held", identity=CHECK_PROCESS, supervisor=ME)
    c = book.apply(candidate.apply, c, decide_check_launch(c, launch, held, at(8)))
    return c


def test_an_execution_is_made_only_where_nothing_is():
    book = Book()
    c, _ = pinned(book)
    requested, execution = start_check(book, c)
    c = book.apply(candidate.apply, c, [requested, execution])
    assert isinstance(decide_execution(c, execution, ExecutionObservation("absent"), at(6)), Act)
    failed = decide_execution(c, execution, ExecutionObservation("diverged", detail="a file"), at(6))
    assert isinstance(failed, ev.ExecutionFailed) and failed.code == "execution-diverged"
    assert isinstance(decide_execution(c, execution, ExecutionObservation("unreadable"), at(6)), Unknown)
    c = book.apply(candidate.apply, c, failed)
    with pytest.raises(Refused) as e:
        request_check_launch(c, "k1", intent_id="l1", log_path="/log", now=at(7))
    assert e.value.code == "execution-not-ready"


def test_a_check_launch_is_decided_like_a_worker_launch():
    book = Book()
    c = launched_check(book)
    run = c.check_run("k1")
    assert run.process == CHECK_PROCESS and run.supervisor == ME and run.launch_intent is None
    with pytest.raises(Refused):
        request_check_launch(c, "k1", intent_id="l2", log_path="/log", now=at(9))
    intent = ev.CheckLaunchRequested(stream=c.check_run("k1").execution, version=1, recorded_at=T0, intent_id="l1",
                                     run_id="r1", check_id="k1", binding_id=BINDING, execution="/x", log_path="/log")
    assert isinstance(decide_check_launch(c, intent, LaunchObservation("none"), at(9)), Act)
    assert isinstance(decide_check_launch(c, intent, LaunchObservation("other"), at(9)), Unknown)
    gone = decide_check_launch(c, intent, LaunchObservation("abandoned"), at(9))
    assert isinstance(gone, ev.CheckLaunchFailed) and gone.code == "launcher-gone"


@pytest.mark.parametrize("result, kind", [("passed", ev.CheckPassed), ("failed", ev.CheckFailed),
                                          ("timed-out", ev.CheckTimedOut)])
def test_a_check_run_has_exactly_one_result_bound_to_its_configuration(result, kind):
    book = Book()
    c = launched_check(book)
    (event,) = check_result(c, "k1", result, at(10), duration_ms=5, output_sha256="3" * 64,
                            output_bytes=10, tail="ok\n", execution="matching",
                            artifacts=[dict(path="report.xml", sha256="4" * 64, size=3)], code="exit",
                            exit_code=1 if result == "failed" else None, cause="timeout")
    assert isinstance(event, kind)
    assert (event.binding_id, event.config_sha256, event.check) == (BINDING, "1" * 64, "tests")
    assert event.artifacts[0].path == "report.xml"
    c = book.apply(candidate.apply, c, event)
    assert c.check_run("k1").result == result
    assert check_result(c, "k1", "passed", at(11), duration_ms=1, output_sha256=None, output_bytes=None,
                        tail="", execution="matching") == []


def test_an_interrupted_run_is_failed_only_once_nothing_of_it_can_run():
    book = Book()
    c = launched_check(book)
    assert interrupted(c, "k1", "alive", at(10)) == []
    assert interrupted(c, "k1", "unknown", at(10)) == []
    (event,) = interrupted(c, "k1", "dead", at(10))
    assert isinstance(event, ev.CheckFailed) and event.code == "interrupted" and event.execution == "none"


def test_a_run_lost_with_the_host_that_drove_it_is_interrupted_and_says_which_host():
    book = Book()
    c = launched_check(book)
    (event,) = interrupted(c, "k1", "lost", at(10))
    assert event.code == "interrupted" and f"host {CHECK_PROCESS.host}" in event.message
    c = book.apply(candidate.apply, c, event)
    assert concluded(c, "tests", "1" * 64) is None  # it says nothing of the candidate: it runs again


def test_an_execution_another_host_was_to_make_is_given_up_by_the_driver_that_took_the_run_over():
    from docket.domain.check import lose_execution

    book = Book()
    c, _ = pinned(book)
    requested, execution = request_check(
        c, book.active_run(), check_id="k1", execution_intent="x1", check="tests", config_sha256="1" * 64,
        argv_sha256="2" * 64, required=True, timeout_ms=60_000, idle_timeout_ms=None,
        execution_for=lambda attempt: f"/alpha/docket/executions/{attempt}", artifact_dir=None, now=at(5),
        repository="/alpha/repo/.git", host="alpha")
    assert isinstance(execution, ev.ExecutionRequestedV2) and execution.host == "alpha"
    assert execution.repository == requested.repository == "/alpha/repo/.git"
    c = book.apply(candidate.apply, c, [requested, execution])
    assert c.check_run("k1").host == "alpha"
    assert lose_execution(c, "k1", here="alpha", now=at(6)) == []  # its own host makes it
    (cancelled,) = lose_execution(c, "k1", here="beta", now=at(6))
    assert isinstance(cancelled, ev.IntentCancelled) and cancelled.intent_id == "x1" and "host alpha" in cancelled.reason
    c = book.apply(candidate.apply, c, cancelled)
    assert c.check_run("k1").execution_intent is None and c.check_run("k1").execution_state == "failed"
    (event,) = interrupted(c, "k1", "none", at(7))  # it never ran: it runs again, on the driver's host
    assert event.code == "interrupted" and concluded(c, "tests", "1" * 64) is None
    assert lose_execution(c, "k1", here="beta", now=at(8)) == []  # nothing pending any more


def test_a_check_has_concluded_by_its_last_result_under_its_configuration_and_an_interrupted_run_says_nothing():
    book = Book()
    c = launched_check(book)
    assert concluded(c, "tests", "1" * 64) is None  # launched, no result yet
    c = book.apply(candidate.apply, c, interrupted(c, "k1", "dead", at(10)))
    assert concluded(c, "tests", "1" * 64) is None  # interrupted with the docket that ran it: it runs again
    c = book.apply(candidate.apply, c, start_check(book, c, check_id="k2", execution_intent="x2"))
    c = book.apply(candidate.apply, c, check_result(c, "k2", "failed", at(11), duration_ms=5, output_sha256=None,
                                                    output_bytes=None, tail="", execution="matching", exit_code=1))
    assert concluded(c, "tests", "1" * 64) == c.check_run("k2")
    assert concluded(c, "tests", "9" * 64) is None and concluded(c, "lint", "1" * 64) is None


def test_removal_waits_for_the_group_and_happens_once():
    book = Book()
    c = launched_check(book)
    (intent,) = request_removal(c, "k1", intent_id="u1", now=at(10))
    assert intent.process.pid == CHECK_PROCESS.pid and intent.binding_id == BINDING
    c = book.apply(candidate.apply, c, intent)
    assert request_removal(c, "k1", intent_id="u2", now=at(10)) == []
    alive = RemovalObservation("present", group="alive")
    assert isinstance(decide_removal(c, intent, alive, at(11)), Unknown)
    dead = RemovalObservation("present", group="dead")
    assert isinstance(decide_removal(c, intent, dead, at(11)), Act)
    gone = decide_removal(c, intent, RemovalObservation("absent"), at(11))
    assert isinstance(gone, ev.ExecutionRemoved) and candidate.made(gone).result == "removed"
    c = book.apply(candidate.apply, c, candidate.made(gone))
    assert c.check_run("k1").execution_state == "removed"


def test_a_cancelled_pin_leaves_nothing_to_check():
    book = Book()
    (intent,) = pin_request(book)
    c = book.apply(candidate.apply, None, intent)
    cancelled = ev.IntentCancelled(stream=c.binding_id, version=c.version + 1, recorded_at=at(1), intent_id="p1",
                                   reason="run aborted")
    assert book.apply(candidate.apply, c, cancelled).status == "diverged"


def test_a_candidate_with_its_checks_survives_a_snapshot_exactly():
    from docket.domain.kernel.canonical import canonical_json
    from docket.domain.kernel.snapshot import SnapshotError, from_value, to_value

    book = Book()
    c = launched_check(book)
    (result,) = check_result(c, "k1", "failed", at(10), duration_ms=5, output_sha256=None,
                             output_bytes=None, tail="", execution="mutated", code="execution-mutated")
    c = book.apply(candidate.apply, c, result)
    value = to_value(c)
    canonical_json(value)  # storable
    assert from_value(candidate.Candidate, value) == c
    value["status"] = "on-fire"  # not one of the literal's values: a damaged snapshot, never state
    with pytest.raises(SnapshotError):
        from_value(candidate.Candidate, value)


def test_every_stream_prefix_names_an_aggregate_whose_snapshots_can_be_checked():
    from docket.adapters.service_layer.kernel.aggregates import AGGREGATES
    from docket.domain.kernel import streams

    prefixes = {value[:-1] for name, value in vars(streams).items() if name.endswith("_PREFIX")}
    assert prefixes == set(AGGREGATES)


def checked(book: Book, result: str = "passed", digest: str = "1" * 64):
    c = launched_check(book)
    (event,) = check_result(c, "k1", result, at(10), duration_ms=5, output_sha256="5" * 64,
                            output_bytes=3, tail="", execution="matching", code="exit", exit_code=1)
    return book.apply(candidate.apply, c, event)


def offered(book: Book, c):
    return book.apply(candidate.apply, c, offer_handoff(c, 1, book.active_run(), at(11)))


def confirm(c, *, generation=1, process="dead", lease=None, pin=None, required=None):
    pin = pin or CandidateRefObservation("matching", commit=PINNED)
    return confirm_handoff(c, worker_generation=generation, process=process, lease_held_by=lease, pin=pin,
                           required={"tests": "1" * 64} if required is None else required, now=at(12))


def test_a_handoff_is_offered_once_by_the_generation_that_made_the_candidate():
    book = Book()
    c = checked(book)
    (event,) = offer_handoff(c, 1, book.active_run(), at(11))
    assert isinstance(event, ev.HandoffOffered) and (event.worker_id, event.generation, event.commit) == (
        "t1", 1, PINNED)
    c = book.apply(candidate.apply, c, event)
    assert offer_handoff(c, 1, book.active_run(), at(12)) == []
    with pytest.raises(Refused) as e:
        offer_handoff(c, 2, book.active_run(), at(12))  # relaunched since: generation 1 is fenced
    assert e.value.code == "stale-generation"


def test_a_handoff_is_confirmed_only_when_every_condition_holds():
    book = Book()
    c = offered(book, checked(book))
    (ok,) = confirm(c)
    assert isinstance(ok, ev.HandoffConfirmed)
    assert [(b.check, b.check_id, b.config_sha256, b.output_sha256) for b in ok.checks] == [
        ("tests", "k1", "1" * 64, "5" * 64)]
    assert candidate.made(ok) is ok
    assert confirm(book.apply(candidate.apply, c, ok)) == []


@pytest.mark.parametrize("change, code", [
    (dict(generation=2), "stale-generation"),
    (dict(process="alive"), "worker-alive"),
    (dict(process="unknown"), "worker-alive"),
    (dict(lease=1), "lease-held"),
    (dict(pin=CandidateRefObservation("missing")), "pin-changed"),
    (dict(pin=CandidateRefObservation("matching", commit="f" * 40)), "pin-changed"),
    (dict(required={"tests": "9" * 64}), "check-config-changed"),
    (dict(required={"tests": "1" * 64, "lint": "2" * 64}), "check-missing"),
])
def test_a_handoff_that_fails_a_condition_is_rejected_naming_it(change, code):
    book = Book()
    c = offered(book, checked(book))
    (rejected,) = confirm(c, **change)
    assert isinstance(rejected, ev.HandoffRejected) and rejected.code == code, rejected
    c = book.apply(candidate.apply, c, rejected)
    assert (c.handoff, c.handoff_code) == ("rejected", code)
    (ok,) = confirm(c)  # once the condition holds, the same handoff is confirmed
    assert isinstance(ok, ev.HandoffConfirmed)


def test_a_failed_required_check_rejects_and_a_fenced_lease_does_not():
    book = Book()
    (rejected,) = confirm(offered(book, checked(book, "failed")))
    assert rejected.code == "check-failed" and "attempt 1" in rejected.message
    book = Book()
    (ok,) = confirm(offered(book, checked(book)), lease=None)
    assert isinstance(ok, ev.HandoffConfirmed)


def test_a_handoff_not_offered_cannot_be_confirmed():
    book = Book()
    with pytest.raises(Refused) as e:
        confirm(checked(book))
    assert e.value.code == "handoff-not-offered"


REMOTE = ("origin", "https://git@forge.example/team/repo.git")


def _run_on_remote(book: Book):
    from docket.domain import run

    r = book.apply(run.apply, None, run.open_run("r1", "i1", "goal", "main", None, "/repo/.git", T0, remote=REMOTE))
    return book.apply(run.apply, r, run.record_base_pin(r, "i1", T0, commit=COMMIT))


def test_a_run_on_a_shared_remote_records_it_and_its_pins_push_there():
    book = Book()
    r = _run_on_remote(book)
    assert r.remote == REMOTE
    (intent,) = pin_request(book, r=r)
    assert isinstance(intent, ev.CandidatePinRequestedV2) and (intent.remote, intent.remote_url) == REMOTE
    (local,) = pin_request(Book())
    assert type(local) is ev.CandidatePinRequested  # a run without one records the v1 intent, as before


def test_a_pin_on_a_shared_remote_is_done_only_once_the_remote_names_the_same_commit():
    from docket.domain.effects import RemoteRefObservation

    book = Book()
    (intent,) = pin_request(book, r=_run_on_remote(book))
    c = book.apply(candidate.apply, None, intent)

    def decide(remote):
        return candidate.decide_pin(c, intent, CandidateRefObservation("matching", commit=PINNED, remote=remote),
                                    at(1))

    assert isinstance(candidate.decide_pin(c, intent, CandidateRefObservation("missing"), at(1)), Act)
    assert isinstance(decide(RemoteRefObservation("missing")), Act)  # pinned here, not pushed yet
    unreachable = decide(RemoteRefObservation("unreachable", detail="connection refused"))
    assert isinstance(unreachable, Unknown) and "connection refused" in unreachable.reason
    assert isinstance(decide(None), Unknown)  # the remote not looked at is not known to have it
    done = decide(RemoteRefObservation("found", PINNED))
    assert isinstance(done, ev.CandidatePinned) and done.commit == PINNED
    other = decide(RemoteRefObservation("found", "f" * 40))
    assert isinstance(other, ev.CandidateDiverged) and other.found == "f" * 40
    assert "on the remote origin" in other.message and "nothing was forced" in other.message
