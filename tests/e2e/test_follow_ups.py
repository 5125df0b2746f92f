"""Follow-up tasks end to end: an agent `docket go` launched proposes one through `docket request propose`; the
run's [inbox] proposals accepts it at once, or queues it for a person who accepts or refuses it with
`docket answer`. An accepted one becomes a task of the run, starts from the proposer's delivered work, reaches the
target, and the receipt says who decided and what task it became. Real processes and a real repository."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import GoWorld, docket_processes, kill, make_go_world, wait_until

TASKS = '[[tasks]]\nid = "name"\ntitle = "name the greeter"\nprompt = "Name the greeter."\n'

# The agent: given the follow-up's prompt, it writes docs.txt from the name.py its proposer delivered; else it
# names the greeter and proposes the follow-up.
PROPOSING = '''
import subprocess, sys
prompt = sys.stdin.read()
if "Document the greeter" in prompt:
    name = open("name.py").read().split("=")[1].strip()
    open("docs.txt", "w").write(f"The greeter is named {name}.\\n")
    sys.exit(0)
open("name.py", "w").write("NAME = 'ada'\\n")
done = subprocess.run([sys.executable, "-m", "docket", "request", "propose", "document the greeter",
                       "--prompt", "Document the greeter in docs.txt.", "--id", "docs"], capture_output=True, text=True)
print("proposed:", done.returncode, done.stdout.strip(), done.stderr.strip())
'''


def proposing_world(tmp_path: Path, policy: str) -> tuple[GoWorld, Path]:
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(PROPOSING))
    config = (f'[agents.proposer]\ncommand = ["{sys.executable}", "{agent}"]\nprompt = "stdin"\n\n'
              f'[inbox]\nproposals = "{policy}"\ntrusted = ["carol"]\n')
    world = make_go_world(tmp_path, tasks=TASKS, extra_config=config)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    return world, keys


def start_go(world: GoWorld, keys: Path, *extra: str) -> subprocess.Popen:
    return world.start("go", "--goal", "name and document", "--tasks", "tasks.toml", "--id", "r1", "--agent",
                       "proposer", "--key", f"{keys}.key", "--json", *extra)


def inbox(world: GoWorld) -> list[dict]:
    return world.json("inbox")["questions"]


def receipt_of(world: GoWorld, out: str, keys: Path) -> dict:
    bundle = Path(json.loads(out)["receipt"]["path"])
    verified = world.run("verify-receipt", str(bundle), "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stderr
    statement = json.loads(base64.b64decode(json.loads(bundle.read_text().splitlines()[0])["payload"]))
    return statement["predicate"]["receipt"]


def finished(go: subprocess.Popen) -> tuple[str, str]:
    try:
        return go.communicate(timeout=240)
    finally:
        if go.poll() is None:
            kill(go)


def test_a_policy_that_accepts_adds_the_follow_up_which_starts_from_its_proposers_work_and_is_delivered(tmp_path):
    world, keys = proposing_world(tmp_path, "accept")
    go = start_go(world, keys)
    out, err = finished(go)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "name.py") == "NAME = 'ada'\n"
    assert world.file_at("main", "docs.txt") == "The greeter is named 'ada'.\n"  # it saw its proposer's work
    (proposed,) = world.events("FollowUpProposed")
    (added,) = world.events("RunTaskAdded")
    assert proposed["payload"]["decision"] == "accepted"
    assert added["payload"]["task"] == {"task_id": "r1.follow-1", "depends_on": ["r1.name"]}
    assert added["payload"]["request_key"] == proposed["payload"]["request_key"]
    status = world.json("status", "r1")
    assert [(t["task_id"], t["result"]) for t in status["tasks"]] == [("r1.name", "passed"),
                                                                       ("r1.follow-1", "passed")]
    receipt = receipt_of(world, out, keys)
    (request,) = receipt["requests"]
    assert (request["kind"], request["title"], request["decision"], request["decided_by"],
            request["added_task"]) == ("propose", "document the greeter", "accepted", None, "r1.follow-1")
    assert "r1.follow-1" in [t["task_id"] for t in receipt["tasks"]]
    assert {proposed["position"], added["position"]} <= set(receipt["cited"])
    assert world.run("verify").returncode == 0
    assert docket_processes(world.ledger) == []


def test_a_queued_follow_up_waits_for_a_trusted_persons_accept_and_the_run_waits_for_it(tmp_path):
    world, keys = proposing_world(tmp_path, "queue")
    go = start_go(world, keys)
    try:
        assert wait_until(lambda: inbox(world), timeout=90)
        (entry,) = inbox(world)
        assert (entry["kind"], entry["reason"], entry["task_id"], entry["choices"]) == (
            "propose", "proposal", "r1.name", ["accept", "refuse"])
        assert entry["proposal"] == {"title": "document the greeter", "prompt": "Document the greeter in docs.txt."}
        listed = world.run("inbox").stdout
        assert "a follow-up task: document the greeter" in listed and "1. accept" in listed, listed
        assert f"proposal {entry['question_id']} from task r1.name" in world.run("status", "r1").stdout
        assert wait_until(lambda: world.events("TaskFinished"), timeout=90)  # the proposer is done
        assert not wait_until(lambda: go.poll() is not None, timeout=4)  # the run waits for the decision
        assert world.events("ReceiptSealed") == []
        untrusted = world.run("answer", entry["question_id"], "accept", "--as", "mallory")
        assert untrusted.returncode == 3 and "untrusted-answerer" in untrusted.stderr
        assert world.events("RunTaskAdded") == []
        accepted = world.run("answer", entry["question_id"], "--choice", "1", "--as", "carol", "--json")
        assert accepted.returncode == 0, accepted.stderr
        assert json.loads(accepted.stdout)["added_task"] == "r1.follow-1"
        again = world.run("answer", entry["question_id"], "refuse", "--as", "carol")
        assert again.returncode == 3 and "already-decided" in again.stderr
        out, err = finished(go)
    finally:
        if go.poll() is None:
            kill(go)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "docs.txt") == "The greeter is named 'ada'.\n"
    assert inbox(world) == []
    (decided,) = world.events("FollowUpDecided")
    assert (decided["payload"]["decision"], decided["payload"]["decided_by"],
            decided["payload"]["task_id"]) == ("accepted", "carol", "r1.follow-1")
    (request,) = receipt_of(world, out, keys)["requests"]
    assert (request["decision"], request["decided_by"], request["added_task"]) == ("accepted", "carol",
                                                                                  "r1.follow-1")
    assert [e["payload"]["code"] for e in world.events("AnswerRefused")] == ["untrusted-answerer"]
    assert len(request["answers_refused"]) == 1


def test_a_refused_follow_up_adds_nothing_and_the_run_is_delivered_without_it(tmp_path):
    world, keys = proposing_world(tmp_path, "queue")
    go = start_go(world, keys)
    try:
        assert wait_until(lambda: inbox(world), timeout=90)
        (entry,) = inbox(world)
        refused = world.run("answer", entry["question_id"], "--choice", "2")
        assert refused.returncode == 0, refused.stderr
        out, err = finished(go)
    finally:
        if go.poll() is None:
            kill(go)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "name.py") == "NAME = 'ada'\n"
    assert "docs.txt" not in git(world.repo, "ls-tree", "--name-only", "main").split()
    assert world.events("RunTaskAdded") == []
    (request,) = receipt_of(world, out, keys)["requests"]
    assert (request["decision"], request["added_task"]) == ("refused", None) and request["decided_by"]


def test_accepted_while_docket_go_was_killed_the_resumed_run_does_the_follow_up_once(tmp_path):
    """docket go killed while the proposal waits; the answer is recorded with no supervisor, killed right after
    it was recorded and given again (one decision); the resumed run does the follow-up and delivers."""
    world, keys = proposing_world(tmp_path, "queue")
    go = start_go(world, keys)
    try:
        assert wait_until(lambda: inbox(world), timeout=90)
        assert wait_until(lambda: world.events("TaskFinished"), timeout=90)
    finally:
        kill(go)
    (entry,) = inbox(world)
    env = dict(world.env, DOCKET_FAULT="answer:after-record")
    killed = subprocess.run(world.argv("answer", entry["question_id"], "accept"), cwd=world.repo, env=env,
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9, killed.stderr
    again = world.run("answer", entry["question_id"], "accept")
    assert again.returncode == 0, again.stderr
    assert len(world.events("FollowUpDecided")) == len(world.events("RunTaskAdded")) == 1
    resumed = world.resume("r1", "--key", f"{keys}.key")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert world.file_at("main", "docs.txt") == "The greeter is named 'ada'.\n"
    assert [e["payload"]["task_id"] for e in world.events("TaskPlanned")] == ["r1.name", "r1.follow-1"]
    assert world.run("verify").returncode == 0
    assert docket_processes(world.ledger) == []


@pytest.mark.parametrize("seed", [20261203, 20261204])
def test_docket_go_killed_at_a_random_moment_of_proposing_and_adding_converges_on_one_follow_up(tmp_path, seed):
    """Killed anywhere from the proposal to the follow-up's delivery, the same command again goes on: one task
    added (a proposer relaunched and proposing again is the same follow-up), delivered once."""
    import random
    import time

    world, keys = proposing_world(tmp_path, "accept")
    go = start_go(world, keys)
    kill_at = random.Random(seed).uniform(0.3, 4.0)
    started = time.monotonic()
    while go.poll() is None and time.monotonic() - started < kill_at:
        time.sleep(0.05)
    if go.poll() is None:
        kill(go)
        go = start_go(world, keys)
    out, err = finished(go)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "docs.txt") == "The greeter is named 'ada'.\n"
    assert len(world.events("RunTaskAdded")) == 1
    assert [e["payload"]["task_id"] for e in world.events("TaskPlanned")] == ["r1.name", "r1.follow-1"]
    receipt_of(world, out, keys)
    assert world.run("verify").returncode == 0
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=20)
