"""Leases on worktrees against process liveness: reclaim rules, pid reuse, stale generations.

The rules run through the service layer (leases.grant_lease observes the holder's
process through the process port) over an in-memory ledger, with FakeProcesses;
pid reuse with the real PsutilProcesses; stale generations through the real CLI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel import ledger as ledger_module
from docket.adapters.service_layer.use_cases.leases import grant_lease
from docket.adapters.service_layer.use_cases.tasks import plan_task
from docket.adapters.service_layer.use_cases.worker_generations import register_worker
from docket.adapters.world.clock import FixedClock
from tests.fakes.processes import FakeProcesses
from docket.adapters.world.processes.lifecycle import PsutilProcesses
from docket.domain import run, worker
from docket.domain.kernel.errors import Refused
from docket.domain.events import LeaseGranted
from docket.domain.containment.processes import ProcessIdentity

from ..unit.builders import COMMIT, T0

REPOSITORY = "/work/repo/.git"
RESOURCE = "worktree/r1/t1"
TTL_MS = 60_000


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def ledger(clock):
    memory = ledger_module.Ledger(Path(":memory:"))
    memory.initialise(T0, "repo-" + "1" * 32, REPOSITORY)
    memory.decide(lambda now: run.open_run("r1", "i1", "g", "main", None, REPOSITORY, now), T0)
    memory.decide(lambda now: run.record_base_pin(memory.get(run.apply, run.stream_of("r1")), "i1", now,
                                                  commit=COMMIT), T0)
    for task_id in ("t1", "t2"):
        plan_task(memory, clock, "r1", task_id, f"task {task_id}")
    register_worker(memory, clock, "r1", "holder", "implementer", "t1")
    register_worker(memory, clock, "r1", "claimant", "implementer", "t2")
    yield memory
    memory.close()


def load(ledger, worker_id: str) -> worker.Worker:
    return ledger.get(worker.apply, worker.stream_of(worker_id))


def launched(ledger, worker_id: str, identity: ProcessIdentity, supervisor: ProcessIdentity) -> None:
    """Record that worker_id's current generation runs as identity (its launch intent and its outcome)."""
    current = load(ledger, worker_id)
    r = ledger.get(run.apply, run.stream_of("r1"))
    (_, intent), = ledger.decide(lambda now: worker.request_launch(
        current, r, intent_id=f"launch-{worker_id}", agent="command", argv_sha256="0" * 64, worktree="/wt",
        log_path=f"/logs/{worker_id}.log", port=None, lease_token=1, now=now), T0)
    observed = worker.LaunchObservation("held", identity, supervisor)
    ledger.decide(lambda now: worker.decide_launch(load(ledger, worker_id), intent, observed, now), T0)
    assert load(ledger, worker_id).status == "running"


def grant(ledger, clock, worker_id: str, processes) -> tuple[int, LeaseGranted]:
    appended = grant_lease(ledger, clock, RESOURCE, worker_id, load(ledger, worker_id).generation,
                           TTL_MS, processes)
    return appended.last


def held_by_a_holder_that_is(state: str, ledger, clock, processes: FakeProcesses) -> int:
    """The holder's lease on RESOURCE (its token), its process in the given state: alive, dead, unknown or none."""
    if state != "none":
        supervisor = processes.start()
        if state == "unknown":  # a process on another machine cannot be looked at
            process = ProcessIdentity("another-host", "another-boot", 4242, 4242, "7")
        else:
            process = processes.start()
        launched(ledger, "holder", process, supervisor)
        if state == "dead":
            processes.exit(process, 0)
        assert processes.liveness(process) == state
    token, _ = grant(ledger, clock, "holder", processes)
    return token


@pytest.mark.parametrize("expired", [True, False], ids=["expired", "unexpired"])
def test_a_lease_whose_holder_is_positively_dead_is_reclaimed(ledger, clock, expired):
    processes = FakeProcesses()
    token = held_by_a_holder_that_is("dead", ledger, clock, processes)
    clock.advance(TTL_MS if expired else 1)
    position, event = grant(ledger, clock, "claimant", processes)
    assert (event.worker_id, event.supersedes_token) == ("claimant", token) and position > token


@pytest.mark.parametrize("expired", [True, False], ids=["expired", "unexpired"])
def test_a_lease_whose_holder_is_alive_is_never_reclaimed(ledger, clock, expired):
    processes = FakeProcesses()
    held_by_a_holder_that_is("alive", ledger, clock, processes)
    clock.advance(TTL_MS * 10 if expired else 1)
    with pytest.raises(Refused) as refused:
        grant(ledger, clock, "claimant", processes)
    assert refused.value.code == "lease-held"


def test_an_expired_lease_whose_holder_on_this_host_cannot_be_observed_is_not_reclaimed(ledger, clock):
    processes = FakeProcesses()
    supervisor, process = processes.start(), processes.start()
    launched(ledger, "holder", process, supervisor)
    processes.set_liveness(process, "unknown")  # here, but unreadable: it may still work in what the lease guards
    grant(ledger, clock, "holder", processes)
    clock.advance(TTL_MS * 10)
    with pytest.raises(Refused) as refused:
        grant(ledger, clock, "claimant", processes)
    assert refused.value.code == "lease-holder-unknown"


def test_the_lease_of_another_hosts_holder_is_reclaimed_only_once_expired(ledger, clock):
    """Another host cannot be looked at (unknown, never dead): its lease goes once that host stopped renewing it."""
    processes = FakeProcesses()
    token = held_by_a_holder_that_is("unknown", ledger, clock, processes)
    clock.advance(TTL_MS - 1)
    with pytest.raises(Refused) as refused:
        grant(ledger, clock, "claimant", processes)
    assert refused.value.code == "lease-held"
    clock.advance(1)
    _, event = grant(ledger, clock, "claimant", processes)
    assert event.supersedes_token == token


def test_the_lease_of_a_holder_that_never_launched_is_reclaimed_once_expired(ledger, clock):
    processes = FakeProcesses()
    token = held_by_a_holder_that_is("none", ledger, clock, processes)
    clock.advance(TTL_MS - 1)
    with pytest.raises(Refused) as refused:
        grant(ledger, clock, "claimant", processes)
    assert refused.value.code == "lease-held"
    clock.advance(1)
    _, event = grant(ledger, clock, "claimant", processes)
    assert event.supersedes_token == token


def test_a_pid_now_held_by_another_start_time_is_dead_and_its_lease_reclaimed(ledger, clock):
    """Pid reuse, with the real process port: this very process, recorded with a start time it does not have."""
    real = PsutilProcesses()
    me = real.identity(os.getpid())
    assert me is not None and real.liveness(me) == "alive"
    someone_before_me = ProcessIdentity(me.host, me.boot_id, me.pid, me.pgid, str(int(me.start_time) - 1))
    assert real.liveness(someone_before_me) == "dead"
    launched(ledger, "holder", someone_before_me, me)
    token, _ = grant(ledger, clock, "holder", real)
    _, event = grant(ledger, clock, "claimant", real)  # unexpired: the holder is positively dead
    assert event.supersedes_token == token


def test_the_holder_itself_alive_keeps_its_lease_with_the_real_port(ledger, clock):
    real = PsutilProcesses()
    me = real.identity(os.getpid())
    launched(ledger, "holder", me, me)
    grant(ledger, clock, "holder", real)
    clock.advance(TTL_MS * 10)
    with pytest.raises(Refused) as refused:
        grant(ledger, clock, "claimant", real)
    assert refused.value.code == "lease-held"


# --- stale generations, through the CLI -------------------------------------------------------------------------


def test_actions_of_a_fenced_generation_are_refused_and_recorded(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("worker", "register", "r1", "--role", "implementer", "--id", "w1")
    old = docket("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "10m", "--json")
    old_token = str(old.json()["token"])
    docket("worker", "relaunch", "w1")

    def refused(*args: str, code: str) -> None:
        result = docket(*args, check=False)
        assert result.returncode == 3 and result.stderr.startswith(f"docket: error: {code}: "), result.stderr
        assert len(result.stderr.splitlines()) == 1

    refused("lease", "renew", "wt/a", "--token", old_token, "--ttl", "10m", code="stale-generation")
    refused("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "10m", code="stale-generation")
    new = docket("lease", "grant", "wt/a", "--worker", "w1", "--generation", "2", "--ttl", "10m", "--json")
    assert new.json()["token"] > int(old_token)
    refused("lease", "renew", "wt/a", "--token", old_token, "--ttl", "10m", code="stale-token")
    refused("lease", "release", "wt/a", "--token", old_token, code="stale-token")

    refusals = [e["payload"] for e in docket("log", "--json", "--type", "WorkerActionRefused").json()["events"]]
    assert [(r["worker_id"], r["generation"], r["action"], r["code"]) for r in refusals] == [
        ("w1", 1, "lease-renew", "stale-generation"),
        ("w1", 1, "lease-grant", "stale-generation"),
        ("w1", 1, "lease-renew", "stale-token"),
        ("w1", 1, "lease-release", "stale-token"),
    ]
    docket("verify")


def _worktree_on(ledger, host: str) -> None:
    """Task t1's worktree, asked for on host and made there."""
    from docket.domain import task
    from docket.domain.effects import WorktreeObservation

    load_t1 = lambda: ledger.get(task.apply, task.stream_of("t1"))  # noqa: E731
    (_, asked), = ledger.decide(lambda now: task.request_worktree(
        load_t1(), ledger.get(run.apply, run.stream_of("r1")), "wt-1", REPOSITORY, "/wt/t1", now, host=host), T0)
    ledger.decide(lambda now: task.decide_worktree(load_t1(), asked, WorktreeObservation("present", head=COMMIT),
                                                   now), T0)


def _driving(ledger, clock, host: str) -> None:
    """A supervision on host holds run r1's driver lease (as `docket go` claims it)."""
    from docket.adapters.service_layer.use_cases.leases import driver_resource
    from docket.domain.containment.process_identity import ProcessIdentity as Process

    supervision = f"supervision-{host}"
    ledger.decide(lambda now: [run.supervised(ledger.get(run.apply, run.stream_of("r1")), supervision,
                                              Process(host, "boot", 7, 7, "1"), now)], clock.now())
    register_worker(ledger, clock, "r1", supervision, "supervisor", None)
    grant_lease(ledger, clock, driver_resource("r1"), supervision, 1, 10 * TTL_MS)


def test_a_task_on_a_host_that_stopped_renewing_is_taken_over_once_its_lease_expired(ledger, clock):
    """take_over gives the generation and the worktree up only once the other host's lease on the worktree expired
    unrenewed, and only by a host that drives the run; never a worktree of this host's, and once."""
    from docket.adapters.service_layer.use_cases.takeover import take_over
    from docket.domain import task

    processes = FakeProcesses()
    _worktree_on(ledger, "another-host")
    held_by_a_holder_that_is("unknown", ledger, clock, processes)  # running on another-host, its lease held
    _driving(ledger, clock, "this-host")
    assert not take_over(ledger, clock, "another-host", "t1", "holder", unjudged=False)  # its own host: never
    clock.advance(TTL_MS - 1)
    assert not take_over(ledger, clock, "this-host", "t1", "holder", unjudged=False)  # still renewed
    clock.advance(1)
    assert not take_over(ledger, clock, "a-third-host", "t1", "holder", unjudged=False)  # it does not drive the run
    assert take_over(ledger, clock, "this-host", "t1", "holder", unjudged=False)
    lost = load(ledger, "holder")
    assert lost.status == "lost"
    t1 = ledger.get(task.apply, task.stream_of("t1"))
    assert (t1.worktree, t1.worktree_host) == (None, None)
    assert not take_over(ledger, clock, "this-host", "t1", "holder", unjudged=False)  # once
