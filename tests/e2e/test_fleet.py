"""Two hosts, one run: two clones of one bare remote ([git] remote = "origin"), one PostgreSQL ledger, a supervisor
on each (DOCKET_HOST alpha and beta, each its own data folder). One drives the run at a time (its driver lease);
the other stands by, and takes the run over only once that lease expires unrenewed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import campaign_cases, git
from tests.e2e.fleet_world import make_fleet
from tests.e2e.go_world import DELIVERED, TASKS, GoWorld, wait_until


@pytest.fixture
def fleet(tmp_path: Path, postgres_url: str) -> tuple[GoWorld, GoWorld, Path]:
    return make_fleet(tmp_path, postgres_url)


def _stop(supervisor: subprocess.Popen[str]) -> str:
    supervisor.send_signal(signal.SIGTERM)
    _, err = supervisor.communicate(timeout=120)
    return err


def _ledger_lines(world: GoWorld, last: int = 80) -> str:
    """The ledger's last events, one line each, for a failure's message (supervisions left out: they repeat)."""
    events = [e for e in json.loads(world.run("log", "--json").stdout)["events"]
              if not e["type"].startswith(("RunSupervised", "RunUnsupervised"))]
    return "\n".join(e["type"] + " " + json.dumps(e["payload"])[:1500] for e in events[-last:])


def _kill_agents(world: GoWorld, host: str) -> None:
    """SIGKILL the process groups of every agent launched on host (a machine dying takes its agents with it)."""
    for launched in world.events("WorkerLaunched"):
        if launched["payload"]["process"]["host"] == host:
            try:
                os.killpg(launched["payload"]["process"]["pgid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def _launches(world: GoWorld) -> Counter:
    return Counter((e["payload"]["worker_id"], e["payload"]["process"]["host"]) for e in world.events("WorkerLaunched"))


FOURTH = '\n[[tasks]]\nid = "extra"\ntitle = "an extra file"\nprompt = """write extra.py: EXTRA = 4\n"""\n'


def test_two_hosts_deliver_one_run_once_with_one_receipt(fleet):
    """Four tasks, a supervisor standing by on each host while alpha's go drives: each generation runs once, on one
    host; the remote's target moves only by docket's compare-and-swaps, each once, to the delivered tree."""
    alpha, beta, remote = fleet
    (alpha.repo / "tasks.toml").write_text(TASKS + FOURTH)
    base = git(remote, "rev-parse", "main")
    supervisors = [beta.start("supervise", "--follow"), alpha.start("supervise", "--follow")]  # one on each
    try:
        done = alpha.go("r1", "--parallel", "2")
    finally:
        err_beta, err_alpha = map(_stop, supervisors)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert "standing by" in err_beta and "another host" in err_beta  # beta saw alpha drive it, and left it alone
    assert "standing by" in err_alpha and "its process is alive" in err_alpha  # alpha's own supervisor too

    generations = [(e["payload"]["worker_id"], e["payload"]["generation"]) for e in alpha.events("WorkerLaunched")]
    assert len(generations) == len(set(generations))  # every task ran once per generation
    assert {host for _, host in _launches(alpha)} == {"alpha"}  # on one host
    assert len(alpha.events("ReceiptSealed")) == 1
    for path, text in {**DELIVERED, "extra.py": "EXTRA = 4\n"}.items():
        assert git(remote, "show", f"main:{path}") + "\n" == text
    git(remote, "merge-base", "--is-ancestor", base, "main")
    moves = [e["payload"] for e in alpha.events("IntegrationTargetRequested")]
    assert moves and len({m["commit"] for m in moves}) == len(moves)  # each move asked for once
    assert [m["expected_commit"] for m in moves] == [base] + [m["commit"] for m in moves[:-1]]  # one line
    assert git(remote, "rev-parse", "main") == moves[-1]["commit"]
    merged = [e["payload"]["merge_commit"] for e in alpha.events("IntegrationStepMerged")]
    assert git(remote, "rev-parse", "refs/docket/integrations/r1") == merged[-1]  # the queue is the remote's too
    assert beta.json("status", "r1")["run"]["status"] == "completed"  # beta's views, from the shared ledger


# A campaign: each case waits out a 60 s driver lease. `make test` runs one of the merge queue's points and one of
# the checks' each run, in rotation (all six within four runs; `make test-campaigns` runs all six). Every point is
# also reached on one host in every run: go:before-integrate, integrate:after-merge-computed and integrate:after-step
# in test_go_crashes.py, integrate:before-push in test_shared_remote.py, check:after-request and check:after-exit in
# test_candidate_crashes.py; and a takeover from a SIGKILLed host by test_a_killed_hosts_unfinished_tasks_... below.
@pytest.mark.campaign
@pytest.mark.parametrize("fault", campaign_cases(
    ["go:before-integrate", "integrate:after-merge-computed", "integrate:before-push", "integrate:after-step"],
    ["check:after-request", "check:after-exit"]))
def test_a_killed_hosts_run_is_finished_by_the_other_once_its_lease_expires(fleet, fault):
    """alpha dies with every task done and the queue not finished, or in the queue's first merge while agents still
    work (its merge computed; its integration ref moved in alpha's clone only; the merge recorded, not verified),
    or in a check (its execution asked for on alpha; its process ended there, unrecorded): beta, standing by, cannot look at alpha's process (unknown, never dead), so it waits for alpha's driver
    lease to expire unrenewed, then takes the run over, relaunches what was unfinished, integrates what is left from
    the remote in its own clone (alpha's is not where the ledger recorded it, as on another machine), moves the
    remote's target by compare-and-swap and seals the one receipt."""
    alpha, beta, remote = fleet
    standing_by = beta.start("supervise", "--follow")
    try:
        killed = alpha.go("r1", "--parallel", "2", fault=fault)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        _kill_agents(beta, "alpha")  # the machine died: its agents with it
        # another machine's clone: the paths the ledger recorded on alpha are not there for beta
        alpha.repo.rename(alpha.repo.with_name("alpha-elsewhere"))
        sealed = wait_until(lambda: beta.events("ReceiptSealed"), timeout=240, step=1)
    finally:
        err = _stop(standing_by)
    assert sealed, err + _ledger_lines(beta)
    assert "standing by" in err
    alpha = GoWorld(alpha.repo.with_name("alpha-elsewhere"), alpha.env)

    supervised = {e["payload"]["supervision_id"]: e["payload"]["supervisor"]["host"]
                  for e in alpha.events("RunSupervised")}
    grants = [e["payload"] for e in alpha.events("LeaseGranted") if e["payload"]["resource"] == "driver/r1"]
    assert [supervised[g["worker_id"]] for g in grants] == ["alpha", "beta"]
    assert grants[1]["supersedes_token"] is not None  # reclaimed: alpha's had expired unrenewed
    assert len(alpha.events("ReceiptSealed")) == 1
    if fault == "go:before-integrate":
        assert {host for _, host in _launches(alpha)} == {"alpha"}  # nothing was left to relaunch
    if fault == "check:after-request":  # alpha's execution is alpha's to make: given up, never made from beta
        assert any("host alpha's to make" in e["payload"]["reason"] for e in alpha.events("IntentCancelled"))
    if fault == "check:after-exit":  # its result would never be taken: interrupted, and checked again on beta
        assert any("host alpha, which stopped driving" in (e["payload"]["message"] or "")
                   for e in alpha.events("CheckFailed"))
    if fault.startswith("check:"):  # checked again on beta, in beta's own data folder
        executions = [e["payload"]["path"] for e in alpha.events("ExecutionCreated")]
        assert any(path.startswith(str(beta.env["XDG_DATA_HOME"])) for path in executions)
    generations = [(e["payload"]["worker_id"], e["payload"]["generation"]) for e in alpha.events("WorkerLaunched")]
    assert len(generations) == len(set(generations))
    for path, text in DELIVERED.items():  # the tree an uninterrupted run delivers
        assert git(remote, "show", f"main:{path}") + "\n" == text
    verified = beta.run("verify")
    assert verified.returncode == 0, verified.stderr


HANG = '[[tasks]]\nid = "slow"\ntitle = "slow"\nprompt = """hang\n"""\n'


def test_a_supervisor_whose_lease_expired_stops_its_agents_and_leaves_the_run_to_the_new_driver(fleet):
    """alpha's supervisor is frozen (SIGSTOP: a machine paused, or cut off from the database) past its leases: beta
    takes the run over and relaunches the task on itself (alpha's generation lost). When alpha wakes, it stops its
    own agent without a word in the ledger (its generation is fenced), never beta's, and exits driver-lost (3)."""
    alpha, beta, _remote = fleet
    for host in (alpha, beta):
        (host.repo / "tasks.toml").write_text(HANG)
    going = alpha.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--json")
    standing_by = None
    try:
        assert wait_until(lambda: alpha.events("WorkerLaunched"), timeout=60)
        standing_by = beta.start("supervise", "--follow")
        going.send_signal(signal.SIGSTOP)
        assert wait_until(lambda: len(beta.events("WorkerLaunched")) == 2, timeout=240, step=1)  # relaunched
        going.send_signal(signal.SIGCONT)
        _, err = going.communicate(timeout=120)
    finally:
        if going.poll() is None:
            going.send_signal(signal.SIGCONT)
            going.kill()
            going.communicate()
        if standing_by is not None:
            _stop(standing_by)
    assert going.returncode == 3, err
    assert "docket: error: driver-lost: " in err
    launched = {(e["payload"]["generation"], e["payload"]["process"]["host"]): e["payload"]["process"]["pid"]
                for e in alpha.events("WorkerLaunched")}
    assert set(launched) == {(1, "alpha"), (2, "beta")}
    assert not Path(f"/proc/{launched[1, 'alpha']}").exists() or "Z" in Path(
        f"/proc/{launched[1, 'alpha']}/stat").read_text().rsplit(")", 1)[1][:3]  # alpha's agent stopped
    assert [(e["payload"]["generation"], e["payload"]["host"]) for e in alpha.events("WorkerLost")] == [(1, "alpha")]
    assert not [e for e in alpha.events("WorkerExited") if e["payload"]["generation"] == 1]  # nothing after it
    stops = [e["payload"] for e in alpha.events("WorkerStopRequested")]
    assert [(p["process"]["host"], p["reason"]) for p in stops] == [("beta", "supervisor-gone")]  # beta's own end


def test_a_killed_hosts_unfinished_tasks_are_relaunched_by_the_other_host(fleet):
    """alpha dies (its supervisor and its agents SIGKILLed) while two agents work: beta, standing by, takes the run
    over once alpha's leases expire unrenewed. It gives alpha's generations up unjudged (WorkerLost) with their
    worktrees (WorktreeLost), launches the next generations in worktrees of its own, with the prompts alpha planned
    fetched from the remote, and delivers the tree an uninterrupted run delivers, with one receipt."""
    alpha, beta, remote = fleet
    tasks = TASKS.replace('prompt = """', 'prompt = """sleep: 5\n')  # alpha dies while its agents work
    for host in (alpha, beta):
        (host.repo / "tasks.toml").write_text(tasks)
    going = alpha.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--parallel", "2", "--json")
    standing_by = None
    try:
        assert wait_until(lambda: len(alpha.events("WorkerLaunched")) == 2, timeout=60)
        standing_by = beta.start("supervise", "--follow")
        going.kill()  # the machine dies: its supervisor, and its agents with it
        going.communicate()
        _kill_agents(alpha, "alpha")
        sealed = wait_until(lambda: alpha.events("ReceiptSealed"), timeout=300, step=1)
    finally:
        if going.poll() is None:
            going.kill()
            going.communicate()
        err = _stop(standing_by) if standing_by is not None else ""
    assert sealed, err + "\n" + _ledger_lines(alpha)

    lost = [e["payload"] for e in alpha.events("WorkerLost")]
    assert sorted((p["worker_id"], p["generation"], p["host"], p["status"]) for p in lost) == [
        ("r1.greet", 1, "alpha", "running"), ("r1.name", 1, "alpha", "running")]
    assert sorted(e["payload"]["task_id"] for e in alpha.events("WorktreeLost")) == ["r1.greet", "r1.name"]
    launches = [(e["payload"]["worker_id"], e["payload"]["generation"], e["payload"]["process"]["host"])
                for e in alpha.events("WorkerLaunched")]
    assert len(launches) == len({(w, g) for w, g, _ in launches})  # every generation launched once
    assert {(w, g) for w, g, h in launches if h == "alpha"} == {("r1.greet", 1), ("r1.name", 1)}
    assert {w for w, _, h in launches if h == "beta"} == {"r1.greet", "r1.name", "r1.shout"}
    relaunched = [e["payload"] for e in alpha.events("WorktreeRequested")
                  if e["payload"]["task_id"] in ("r1.greet", "r1.name")]
    assert sorted(p["host"] for p in relaunched) == ["alpha", "alpha", "beta", "beta"]
    assert len(alpha.events("ReceiptSealed")) == 1
    for path, text in DELIVERED.items():  # the tree an uninterrupted run delivers
        assert git(remote, "show", f"main:{path}") + "\n" == text
    verified = beta.run("verify")
    assert verified.returncode == 0, verified.stderr


# A campaign: one seed a run in `make test` (in rotation), both in `make test-campaigns`.
@pytest.mark.campaign
@pytest.mark.parametrize("seed", campaign_cases([2026_12_03, 2026_12_04], salt=1))
def test_a_host_dying_at_a_random_instant_leaves_the_run_to_the_other(fleet, seed):
    """alpha's supervisor and its agents SIGKILLed at a random instant of the run, its agents' work or its merge
    queue (seeded: a failure names it; 2026_12_03 kills it mid-queue, where beta once waited for a merge alpha had
    made in its own clone only): beta finishes the run once alpha's leases expire, with the tree an uninterrupted
    run delivers, each generation launched once, each candidate pinned once, one receipt."""
    import random
    import time

    alpha, beta, remote = fleet
    tasks = TASKS.replace('prompt = """', 'prompt = """sleep: 2\n')  # a run here takes 8 s or so from its plan
    for host in (alpha, beta):
        (host.repo / "tasks.toml").write_text(tasks)
    delay = random.Random(seed).uniform(0.0, 5.0)
    standing_by = beta.start("supervise", "--follow")
    going = alpha.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--parallel", "2", "--json")
    try:
        assert wait_until(lambda: beta.events("RunPlanned"), timeout=60, step=0.2)
        time.sleep(delay)
        going.kill()
        going.communicate()
        _kill_agents(beta, "alpha")
        sealed = wait_until(lambda: beta.events("ReceiptSealed"), timeout=300, step=1)
    finally:
        if going.poll() is None:
            going.kill()
            going.communicate()
        err = _stop(standing_by)
    assert sealed, f"killed after {delay:.2f} s\n{err}\n" + _ledger_lines(beta)
    drivers = [e for e in beta.events("LeaseGranted") if e["payload"]["resource"] == "driver/r1"]
    assert len(drivers) == 2, f"killed after {delay:.2f} s, when the run had ended: no takeover was tried"
    generations = [(e["payload"]["worker_id"], e["payload"]["generation"]) for e in beta.events("WorkerLaunched")]
    assert len(generations) == len(set(generations)), f"killed after {delay:.2f} s"
    pinned = beta.events("CandidatePinned")
    assert len({e["payload"]["binding_id"] for e in pinned}) == len(pinned)
    assert len(beta.events("ReceiptSealed")) == 1
    for path, text in DELIVERED.items():
        assert git(remote, "show", f"main:{path}") + "\n" == text, f"killed after {delay:.2f} s\n" + _ledger_lines(
            beta, last=300)
    verified = beta.run("verify")
    assert verified.returncode == 0, verified.stderr


def test_a_host_whose_clock_runs_ahead_is_warned_and_its_early_takeover_does_nothing_twice(fleet):
    """beta's clock runs ten minutes ahead: docket warns (clock-skew, against the database server's clock), and beta
    sees alpha's driver lease as expired while alpha still renews it. Its takeover comes early, but the leases'
    tokens fence alpha: alpha stops its own agents and exits driver-lost, and beta delivers the tree an
    uninterrupted run delivers, with each generation launched once and one receipt."""
    alpha, beta, remote = fleet
    tasks = TASKS.replace('prompt = """', 'prompt = """sleep: 3\n')
    for host in (alpha, beta):
        (host.repo / "tasks.toml").write_text(tasks)
    beta.env.update(DOCKET_TESTING="1", DOCKET_CLOCK_SKEW_MS=str(10 * 60_000))
    going = alpha.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "r1", "--parallel", "2", "--json")
    standing_by = None
    try:
        assert wait_until(lambda: alpha.events("WorkerLaunched"), timeout=60)
        standing_by = beta.start("supervise", "--follow")
        _, err = going.communicate(timeout=240)
        sealed = wait_until(lambda: beta.events("ReceiptSealed"), timeout=240, step=1)
    finally:
        if going.poll() is None:
            going.kill()
            going.communicate()
        beta_err = _stop(standing_by) if standing_by is not None else ""
    assert "docket: warning: clock-skew: this host's clock is 600." in beta_err and "ahead of" in beta_err
    assert sealed, beta_err + _ledger_lines(beta)
    assert going.returncode == 3 and "driver-lost" in err, err + _ledger_lines(beta, last=400)  # fenced at work
    grants = [e["payload"] for e in beta.events("LeaseGranted") if e["payload"]["resource"] == "driver/r1"]
    assert len(grants) == 2 and grants[1]["supersedes_token"] is not None  # taken over, early
    # alpha, fenced but not yet knowing it, never took beta's generations back (it once did, each a cycle lost)
    assert {e["payload"]["host"] for e in beta.events("WorkerLost")} <= {"alpha"}
    generations = [(e["payload"]["worker_id"], e["payload"]["generation"]) for e in beta.events("WorkerLaunched")]
    assert len(generations) == len(set(generations))
    assert len(beta.events("ReceiptSealed")) == 1
    for path, text in DELIVERED.items():
        assert git(remote, "show", f"main:{path}") + "\n" == text, _ledger_lines(beta)
    verified = beta.run("verify")
    assert verified.returncode == 0, verified.stderr
