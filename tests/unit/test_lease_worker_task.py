import pytest

from docket.domain import events as ev
from docket.domain import lease, task, worker
from docket.domain.kernel.errors import Refused

from .builders import T0, Book, at


def test_worker_registers_at_generation_one_and_relaunch_fences_the_old_generation():
    book = Book()
    r = book.active_run()
    w = book.worker(r)
    assert w.generation == 1
    event = worker.relaunch(w, r, T0)
    assert isinstance(event, ev.WorkerRelaunched) and (event.generation, event.fenced_generation) == (2, 1)
    w = book.apply(worker.apply, w, event)
    with pytest.raises(Refused) as e:
        worker.require_current(w, 1)
    assert e.value.code == "stale-generation"


def test_a_worker_registers_once_and_only_in_an_open_run_with_its_own_task():
    book = Book()
    r = book.active_run()
    w = book.worker(r)
    with pytest.raises(Refused) as e:
        worker.register(w, r, "w1", "implementer", None, None, T0)
    assert e.value.code == "worker-exists"
    with pytest.raises(Refused) as e:
        worker.register(None, r, "w2", "implementer", "other-run", "t9", T0)
    assert e.value.code == "task-not-in-run"


def test_tasks_are_planned_once_inside_open_runs():
    book = Book()
    r = book.active_run()
    t = book.task(r)
    with pytest.raises(Refused) as e:
        task.plan(t, r, "t1", "again", T0)
    assert e.value.code == "task-exists"
    from docket.domain import run
    closed = book.apply(run.apply, r, run.abort(r, "stop", T0))
    with pytest.raises(Refused) as e:
        task.plan(None, closed, "t2", "late", T0)
    assert e.value.code == "run-closed"


def test_fencing_token_is_the_grant_position_and_grows():
    book = Book()
    r = book.active_run()
    w = book.worker(r)
    first = book.lease(None, None, w, r)
    assert first.token == book.position and first.status == "held"
    released = book.apply(lease.apply, first, lease.release(first, "wt/a", first.token, T0))
    second = book.lease(released, w, w, r, now=at(1))
    assert second.token > first.token


def test_second_grant_on_a_held_unexpired_lease_is_refused():
    book = Book()
    r = book.active_run()
    w1, w2 = book.worker(r, "w1"), book.worker(r, "w2")
    held = book.lease(None, None, w1, r, ttl=60_000)
    with pytest.raises(Refused) as e:
        lease.grant(held, w1, w2, 1, r, "wt/a", 60_000, at(59_999))
    assert e.value.code == "lease-held"


def test_an_expired_lease_can_be_granted_again_and_names_what_it_supersedes():
    book = Book()
    r = book.active_run()
    w1, w2 = book.worker(r, "w1"), book.worker(r, "w2")
    held = book.lease(None, None, w1, r, ttl=60_000)
    event = lease.grant(held, w1, w2, 1, r, "wt/a", 60_000, at(60_000))
    assert event.supersedes_token == held.token and event.worker_id == "w2"


@pytest.mark.parametrize("liveness, before_expiry, after_expiry", [
    ("alive", "lease-held", "lease-held"),
    ("unknown", "lease-holder-unknown", "lease-holder-unknown"),  # here, unreadable: it may still be working
    ("elsewhere", "lease-held", None),  # another host's: reclaimed once that host stopped renewing it
    ("dead", None, None),
    ("none", "lease-held", None),
])
def test_a_held_lease_is_reclaimed_by_what_is_known_of_its_holder(liveness, before_expiry, after_expiry):
    book = Book()
    r = book.active_run()
    w1, w2 = book.worker(r, "w1"), book.worker(r, "w2")
    held = book.lease(None, None, w1, r, ttl=60_000)
    for now, expected in ((at(59_999), before_expiry), (at(60_000), after_expiry)):
        if expected is None:
            assert lease.grant(held, w1, w2, 1, r, "wt/a", 60_000, now, liveness).supersedes_token == held.token
            continue
        with pytest.raises(Refused) as e:
            lease.grant(held, w1, w2, 1, r, "wt/a", 60_000, now, liveness)
        assert e.value.code == expected, (liveness, now)


def test_a_fenced_holder_loses_its_lease_to_a_new_grant():
    book = Book()
    r = book.active_run()
    w1 = book.worker(r, "w1")
    held = book.lease(None, None, w1, r, ttl=60_000)
    w1 = book.apply(worker.apply, w1, worker.relaunch(w1, r, at(10)))
    event = lease.grant(held, w1, w1, 2, r, "wt/a", 60_000, at(20))
    assert event.generation == 2 and event.supersedes_token == held.token
    with pytest.raises(Refused) as e:
        lease.grant(held, w1, w1, 1, r, "wt/a", 60_000, at(20))
    assert e.value.code == "stale-generation"


def test_renew_release_and_expire_check_token_generation_and_time():
    book = Book()
    r = book.active_run()
    w = book.worker(r)
    held = book.lease(None, None, w, r, ttl=1_000)
    with pytest.raises(Refused) as e:
        lease.renew(held, w, "wt/a", held.token + 1, 1_000, at(10))
    assert e.value.code == "stale-token"
    renewed = book.apply(lease.apply, held, lease.renew(held, w, "wt/a", held.token, 5_000, at(500)))
    assert renewed.expires_at == at(5_500)
    with pytest.raises(Refused) as e:
        lease.expire(renewed, "wt/a", at(5_499))
    assert e.value.code == "lease-not-expired"
    with pytest.raises(Refused) as e:
        lease.renew(renewed, w, "wt/a", held.token, 1_000, at(5_500))
    assert e.value.code == "lease-expired"
    expired = book.apply(lease.apply, renewed, lease.expire(renewed, "wt/a", at(5_500)))
    assert expired.status == "expired"
    with pytest.raises(Refused) as e:
        lease.release(expired, "wt/a", held.token, at(6_000))
    assert e.value.code == "lease-not-held"
    relaunched = book.apply(worker.apply, w, worker.relaunch(w, r, at(1)))
    held2 = book.lease(expired, relaunched, relaunched, r, ttl=1_000, now=at(7_000))
    with pytest.raises(Refused) as e:
        lease.renew(held2, book.apply(worker.apply, relaunched, worker.relaunch(relaunched, r, at(7_001))),
                    "wt/a", held2.token, 1_000, at(7_002))
    assert e.value.code == "stale-generation"


def test_a_generation_above_the_current_one_is_unknown_and_one_below_is_fenced():
    book = Book()
    r = book.active_run()
    w = book.worker(r, "w1")
    with pytest.raises(Refused) as e:
        worker.require_current(w, 2)
    assert e.value.code == "unknown-generation"
    assert e.value.message == "worker w1 has no generation 2; its current generation is 1"
    w = book.apply(worker.apply, w, worker.relaunch(w, r, T0))
    worker.require_current(w, 2)
    with pytest.raises(Refused) as e:
        worker.require_current(w, 1)
    assert e.value.code == "stale-generation" and "fenced" in e.value.message


def test_a_worktree_asked_for_on_a_host_names_it_and_losing_it_cancels_its_intent_then_clears_it():
    book = Book()
    r = book.active_run()
    t = book.task(r)
    assert task.lose_worktree(t, r, "alpha", "gone", at(1)) == []  # no worktree, no intent: nothing to give up
    (asked,) = task.request_worktree(t, r, "wt1", "/repo/.git", "/w/t1", at(1), host="alpha")
    assert (asked.type_name(), asked.host) == ("WorktreeRequested.v2", "alpha")
    t = book.apply(task.apply, t, asked)
    assert (t.worktree_intent, t.worktree_host) == ("wt1", "alpha")
    cancelled, lost = task.lose_worktree(t, r, "alpha", "alpha stopped renewing", at(2))
    assert (cancelled.type_name(), cancelled.intent_id) == ("IntentCancelled.v1", "wt1")
    assert (lost.type_name(), lost.path, lost.version) == ("WorktreeLost.v1", None, cancelled.version + 1)
    t = book.apply(task.apply, t, [cancelled, lost])
    assert (t.worktree, t.worktree_intent, t.worktree_host) == (None, None, None)
    (again,) = task.request_worktree(t, r, "wt2", "/repo/.git", "/w/t1", at(3), host="beta")
    t = book.apply(task.apply, t, again)
    t = book.apply(task.apply, t, ev.WorktreeCreated(stream=task.stream_of("t1"),
                                                     version=t.version + 1, recorded_at=at(4), intent_id="wt2",
                                                     run_id="r1", task_id="t1", path="/w/t1", branch="docket/r1/t1",
                                                     head="a" * 40, result="created"))
    (lost,) = task.lose_worktree(t, r, "beta", "beta stopped renewing", at(5))
    assert lost.path == "/w/t1"
    t = book.apply(task.apply, t, lost)
    assert (t.worktree, t.branch, t.prepared) == (None, None, False)
    (legacy,) = task.request_worktree(t, r, "wt3", "/repo/.git", "/w/t1", at(6))
    assert legacy.type_name() == "WorktreeRequested.v1"  # no host given: as before hosts were recorded
