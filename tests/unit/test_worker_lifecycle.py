"""The Worker aggregate's process life, decided on plain values: launch, stop, exit, relaunch."""

from __future__ import annotations

import pytest

from docket.domain import worker
from docket.domain.effects import Act, Unknown
from docket.domain.kernel.errors import Refused
from docket.domain.containment.processes import ProcessIdentity

from .builders import T0, Book, at

AGENT = ProcessIdentity(host="h", boot_id="b", pid=100, pgid=100, start_time="5")
SUPERVISOR = ProcessIdentity(host="h", boot_id="b", pid=99, pgid=99, start_time="4")


def launching(book: Book):
    r = book.active_run(supervised=True)
    w = book.apply(worker.apply, None, worker.register(None, r, "w1", "implementer", "r1", "t1", T0))
    intent = worker.request_launch(w, r, intent_id="l1", agent="command", argv_sha256="0" * 64, worktree="/w",
                                   log_path="/l", port=None, lease_token=3, now=at(1))
    return r, book.apply(worker.apply, w, intent), intent


def test_a_launch_is_decided_by_what_the_launcher_sees():
    book = Book()
    _, w, intent = launching(book)
    assert isinstance(worker.decide_launch(w, intent, worker.LaunchObservation("none"), at(2)), Act)
    assert isinstance(worker.decide_launch(w, intent, worker.LaunchObservation("other"), at(2)), Unknown)
    failed = worker.decide_launch(w, intent, worker.LaunchObservation("failed", detail="no such program"), at(2))
    assert failed.type_name() == "WorkerLaunchFailed.v1" and failed.code == "launch-failed"
    gone = worker.decide_launch(w, intent, worker.LaunchObservation("abandoned"), at(2))
    assert gone.type_name() == "WorkerLaunchFailed.v1" and gone.code == "launcher-gone"
    launched = worker.decide_launch(w, intent, worker.LaunchObservation("held", AGENT, SUPERVISOR), at(2))
    assert launched.type_name() == "WorkerLaunched.v1" and launched.process.pid == 100
    w = book.apply(worker.apply, w, launched)
    assert (w.status, w.process, w.supervisor) == ("running", AGENT, SUPERVISOR)


def test_a_stop_is_refused_while_launching_and_decided_by_the_groups_liveness_once_running():
    book = Book()
    _, w, intent = launching(book)
    with pytest.raises(Refused) as e:
        worker.request_stop(w, intent_id="s1", reason="requested", now=at(2))
    assert e.value.code == "worker-launching"
    w = book.apply(worker.apply, w, worker.decide_launch(w, intent, worker.LaunchObservation("held", AGENT,
                                                                                                SUPERVISOR), at(2)))
    (stop,) = worker.request_stop(w, intent_id="s1", reason="timeout", now=at(3))
    assert stop.process.pid == 100
    w = book.apply(worker.apply, w, stop)
    assert worker.request_stop(w, intent_id="s2", reason="requested", now=at(4)) == []  # one stop at a time
    assert isinstance(worker.decide_stop(w, stop, worker.StopObservation("alive"), at(4)), Act)
    assert isinstance(worker.decide_stop(w, stop, worker.StopObservation("unknown"), at(4)), Unknown)
    done = worker.decide_stop(w, stop, worker.StopObservation("dead"), at(4))
    assert done.type_name() == "WorkerStopped.v1" and worker.stopped(done).result == "stopped"
    w = book.apply(worker.apply, w, done)
    assert worker.exit_cause(w) == "timeout"


def test_an_exit_is_recorded_once_and_a_running_generation_cannot_be_relaunched():
    book = Book()
    r, w, intent = launching(book)
    w = book.apply(worker.apply, w, worker.decide_launch(w, intent, worker.LaunchObservation("held", AGENT,
                                                                                                SUPERVISOR), at(2)))
    with pytest.raises(Refused) as e:
        worker.relaunch(w, r, at(3))
    assert e.value.code == "worker-running"
    assert worker.exit_cause(w) == "unknown"  # no stop was asked for
    (exited,) = worker.exited(w, 1, cause="exited", exit_code=0, signal=None, duration_ms=5, log_sha256=None,
                              log_bytes=None, tail="x" * 5000, now=at(4))
    assert len(exited.tail) == 4000
    w = book.apply(worker.apply, w, exited)
    assert worker.exited(w, 1, cause="unknown", exit_code=None, signal=None, duration_ms=None, log_sha256=None,
                         log_bytes=None, tail="", now=at(5)) == []
    w = book.apply(worker.apply, w, worker.relaunch(w, r, at(6)))
    assert (w.generation, w.status, w.process) == (2, "registered", None)


def test_a_generation_on_a_host_gone_is_lost_unjudged_once_and_can_then_be_relaunched():
    book = Book()
    r, w, intent = launching(book)
    assert worker.lose(w, r, 1, host="h", lease_expired_at=at(9), now=at(10)) == []  # launching: its gate decides
    w = book.apply(worker.apply, w, worker.decide_launch(w, intent, worker.LaunchObservation("held", AGENT,
                                                                                                SUPERVISOR), at(2)))
    assert worker.lose(w, r, 2, host="h", lease_expired_at=None, now=at(10)) == []  # not its current generation
    (lost,) = worker.lose(w, r, 1, host="h", lease_expired_at=at(9), now=at(10))
    assert (lost.type_name(), lost.status, lost.host, lost.lease_expired_at) == ("WorkerLost.v1", "running", "h", at(9))
    w = book.apply(worker.apply, w, lost)
    assert w.status == "lost"
    assert worker.lose(w, r, 1, host="h", lease_expired_at=at(9), now=at(11)) == []  # once
    assert worker.exited(w, 1, cause="unknown", exit_code=None, signal=None, duration_ms=None, log_sha256=None,
                         log_bytes=None, tail="", now=at(12)) == []  # the gone host's late word changes nothing
    w = book.apply(worker.apply, w, worker.relaunch(w, r, at(13)))
    assert (w.generation, w.status) == (2, "registered")


def test_an_exited_generation_is_lost_too_its_work_being_on_the_host_gone():
    book = Book()
    r, w, intent = launching(book)
    w = book.apply(worker.apply, w, worker.decide_launch(w, intent, worker.LaunchObservation("held", AGENT,
                                                                                                SUPERVISOR), at(2)))
    w = book.apply(worker.apply, w, worker.exited(w, 1, cause="exited", exit_code=0, signal=None, duration_ms=5,
                                                  log_sha256=None, log_bytes=None, tail="", now=at(3)))
    (lost,) = worker.lose(w, r, 1, host="h", lease_expired_at=None, now=at(4))
    assert lost.status == "exited" and book.apply(worker.apply, w, lost).status == "lost"
