"""The inbox end to end: an agent `docket go` launched asks through `docket request`, a person answers with
`docket answer`, and the answer reaches the target. Real processes, a real repository, the sandbox as configured.
"""

from __future__ import annotations

import base64
import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.e2e.go_world import GoWorld, docket_processes, kill, make_go_world, wait_until

TASKS = '[[tasks]]\nid = "name"\ntitle = "name the greeter"\nprompt = "Name the greeter."\n'

# The agent: asks which name (choices ada, bob), waits for the answer, writes it into name.py.
ASKING = '''
import os, subprocess, sys
answer = subprocess.run([sys.executable, "-m", "docket", "request", "ask", "Which name?", "--reason", "choice",
                         "--choice", "ada", "--choice", "bob", "--id", "which-name"],
                        capture_output=True, text=True)
if answer.returncode != 0:
    sys.exit(answer.stderr)
open("name.py", "w").write(f"NAME = {answer.stdout.strip()!r}\\n")
'''

# The agent: asks without waiting and exits; the next generation finds the answer in its prompt and writes it.
ASKING_THEN_EXITING = '''
import re, subprocess, sys
prompt = sys.stdin.read()
found = re.findall(r"^A \\(([^)]*)\\): (.*)$", prompt, re.M)
if found:
    open("name.py", "w").write(f"NAME = {found[-1][1]!r}\\n")
    sys.exit(0)
done = subprocess.run([sys.executable, "-m", "docket", "request", "ask", "Which name should the greeter have?",
                       "--no-wait", "--id", "name-q"], capture_output=True, text=True)
print(done.stdout.strip(), done.stderr.strip())
'''


def asking_world(tmp_path: Path, script: str, *, idle_timeout: str = "3s", extra: str = "") -> GoWorld:
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(script))
    config = (f'[agents.asker]\ncommand = ["{sys.executable}", "{agent}"]\nprompt = "stdin"\n'
              f'idle_timeout = "{idle_timeout}"\n{extra}')
    return make_go_world(tmp_path, tasks=TASKS, extra_config=config)


def start_go(world: GoWorld, run_id: str = "r1"):
    return world.start("go", "--goal", "name it", "--tasks", "tasks.toml", "--id", run_id, "--agent", "asker",
                       "--json")


def stop(go) -> None:  # noqa: ANN001
    """A docket go a test started and left running (it failed first) is killed, not left behind."""
    if go.poll() is None:
        kill(go)


def open_questions(world: GoWorld) -> list[dict]:
    return world.json("inbox")["questions"]


def task_state(world: GoWorld, run_id: str = "r1") -> str:
    (task,) = world.json("status", run_id)["tasks"]
    return task["state"]


def test_an_agent_asks_a_person_answers_and_the_answer_reaches_the_target(tmp_path):
    world = asking_world(tmp_path, ASKING)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0
    go = world.start("go", "--goal", "name it", "--tasks", "tasks.toml", "--id", "r1", "--agent", "asker",
                     "--key", f"{keys}.key", "--json")
    try:
        assert wait_until(lambda: open_questions(world), timeout=60)
        (question,) = open_questions(world)
        assert (question["run_id"], question["task_id"], question["reason"], question["question"],
                question["choices"], question["generation"]) == ("r1", "r1.name", "choice", "Which name?",
                                                                 ["ada", "bob"], 1)
        assert wait_until(lambda: task_state(world) == "awaiting-input", timeout=30)
        # longer than the agent's idle timeout (3s): its clocks stop while a person answers
        assert not wait_until(lambda: go.poll() is not None, timeout=6)
        answered = world.run("answer", question["question_id"], "--choice", "2", "--json")
        assert answered.returncode == 0, answered.stderr
        assert json.loads(answered.stdout)["answer"] == "bob"
        out, err = go.communicate(timeout=180)
    finally:
        stop(go)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "name.py") == "NAME = 'bob'\n"
    assert open_questions(world) == []
    (asked,), (answer,) = world.events("QuestionAsked"), world.events("QuestionAnswered")
    assert answer["payload"]["request_key"] == asked["payload"]["request_key"] == question["question_id"]
    assert (answer["payload"]["answer"], answer["payload"]["choice"], answer["payload"]["via"]) == ("bob", 2, "cli")
    assert [e["payload"]["cause"] for e in world.events("WorkerExited")] == ["exited"]  # no idle timeout
    assert world.run("verify").returncode == 0
    assert docket_processes(world.ledger) == []
    # the sealed receipt cites the question, its answer and who gave it, and verifies offline
    bundle = Path(json.loads(out)["receipt"]["path"])
    verified = world.run("verify-receipt", str(bundle), "--key", f"{keys}.pub", "--json")
    assert verified.returncode == 0, verified.stderr
    statement = json.loads(base64.b64decode(json.loads(bundle.read_text().splitlines()[0])["payload"]))
    receipt = statement["predicate"]["receipt"]
    (request,) = receipt["requests"]
    assert request == {"request": question["question_id"], "task_id": "r1.name", "worker_id": "r1.name",
                       "generation": 1, "request_id": "which-name", "kind": "ask", "question": "Which name?",
                       "reason": "choice", "choices": ["ada", "bob"], "delivered": True, "refused": [],
                       "answers_refused": [], "answer": {"text": "bob", "choice": 2, "by": answer["payload"][
                           "answered_by"], "via": "cli"}}
    assert {asked["position"], answer["position"]} <= set(receipt["cited"])
    # a receipt that says another answer was given contradicts the cited event, its digest made to match
    from docket.domain.kernel.errors import VerificationFailed
    from docket.domain.reports.receipts import receipt_sha256, verify_statement

    request["answer"]["text"] = "ada"
    statement["predicate"]["receipt_sha256"] = receipt_sha256(receipt)
    with pytest.raises(VerificationFailed) as caught:
        verify_statement(statement)
    assert caught.value.code == "receipt-contradicts-event" and "answer" in caught.value.message


def test_an_answer_from_someone_untrusted_is_refused_and_kept_and_a_trusted_one_is_taken(tmp_path):
    world = asking_world(tmp_path, ASKING, extra='\n[inbox]\ntrusted = ["ada@example.com"]\n')
    go = start_go(world)
    try:
        assert wait_until(lambda: open_questions(world), timeout=60)
        (question,) = open_questions(world)
        split = world.run("answer", question["question_id"], "ada", "and", "more")  # one answer, one argument
        assert split.returncode == 2 and split.stderr.startswith("docket: error: usage: unrecognized arguments")
        refused = world.run("answer", question["question_id"], "--as", "mallory@example.com", "ada")  # options first
        assert refused.returncode == 3
        assert refused.stderr.startswith("docket: error: untrusted-answerer: ")
        assert "Traceback" not in refused.stderr
        assert [q["question_id"] for q in open_questions(world)] == [question["question_id"]]  # still open
        taken = world.run("answer", question["question_id"], "ada", "--as", "ada@example.com", "--json")
        assert taken.returncode == 0, taken.stderr
        again = world.run("answer", question["question_id"], "bob", "--as", "ada@example.com")
        assert again.returncode == 3 and again.stderr.startswith("docket: error: already-answered: ")
        out, err = go.communicate(timeout=180)
    finally:
        stop(go)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "name.py") == "NAME = 'ada'\n"
    assert [(e["payload"]["answered_by"], e["payload"]["code"]) for e in world.events("AnswerRefused")] == [
        ("mallory@example.com", "untrusted-answerer")]
    assert [e["payload"]["answered_by"] for e in world.events("QuestionAnswered")] == ["ada@example.com"]


def test_a_task_whose_agent_exited_waiting_is_continued_by_the_answer(tmp_path):
    world = asking_world(tmp_path, ASKING_THEN_EXITING)
    go = start_go(world)
    try:
        assert wait_until(lambda: open_questions(world), timeout=60)
        assert wait_until(lambda: task_state(world) == "awaiting-input", timeout=30)
        assert [e["payload"]["cause"] for e in world.events("WorkerExited")] == ["exited"]
        (question,) = open_questions(world)
        assert world.run("answer", question["question_id"], "carol").returncode == 0
        out, err = go.communicate(timeout=180)
    finally:
        stop(go)
    assert go.returncode == 0, err + out
    (row,) = json.loads(out)["tasks"]
    assert (row["result"], row["cycles"]) == ("delivered", 1)  # waiting for the answer spent no cycle
    assert world.file_at("main", "name.py") == "NAME = 'carol'\n"
    (continued,) = world.events("TaskAnswered")
    assert continued["payload"]["generation"] == 1
    assert continued["payload"]["request_keys"] == [question["question_id"]]
    assert "Which name should the greeter have?" in continued["payload"]["note"]
    assert [e["payload"]["generation"] for e in world.events("WorkerExited")] == [1, 2]
    assert world.events("TaskFeedbackRecorded") == []


# The agent's start: the answer its prompt carries (told after an earlier generation asked), else it asks and waits.
NAME_FROM_PROMPT_OR_ASKED = '''
import re, subprocess, sys
prompt = sys.stdin.read()
found = re.findall(r"^A \\(([^)]*)\\): (.*)$", prompt, re.M)
if found:
    name = found[-1][1]
else:
    asked = subprocess.run([sys.executable, "-m", "docket", "request", "ask", "Which name?", "--id", "which"],
                           capture_output=True, text=True)
    if asked.returncode != 0:
        sys.exit(asked.stderr)
    name = asked.stdout.strip()
'''
ASK_OR_USE = NAME_FROM_PROMPT_OR_ASKED + '''open("name.py", "w").write(f"NAME = {name!r}\\n")
'''


def start_faulted(world: GoWorld, fault: str | None, *args: str):
    import subprocess

    env = dict(world.env, **({"DOCKET_FAULT": fault} if fault else {}))
    argv = args or ("go", "--goal", "name it", "--tasks", "tasks.toml", "--id", "r1", "--agent", "asker", "--json")
    return subprocess.Popen(world.argv(*argv), cwd=world.repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def answer_each_question(world: GoWorld, go, text: str = "bob", timeout: float = 180) -> None:
    """Answer every question that opens until go ends."""
    import time

    end = time.monotonic() + timeout
    while go.poll() is None and time.monotonic() < end:
        for question in open_questions(world):
            world.run("answer", question["question_id"], text)
        time.sleep(0.3)


def assert_one_answer_per_question_and_delivered(world: GoWorld, summary: dict, name: str = "bob") -> None:
    asked = [e["payload"]["request_key"] for e in world.events("QuestionAsked")]
    answered = [e["payload"]["request_key"] for e in world.events("QuestionAnswered")]
    assert asked and sorted(answered) == sorted(asked) and len(set(answered)) == len(answered)
    assert summary["outcome"] == "delivered"
    assert world.file_at("main", "name.py") == f"NAME = {name!r}\n"
    assert len(world.events("TaskAnswered")) <= 1
    assert world.run("verify").returncode == 0
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=20)


INBOX_POINTS = ["request:before-reply", "go:before-answered", "answer:after-record"]  # the last, killing the answer


@pytest.mark.parametrize("point", INBOX_POINTS[:2])
def test_docket_go_killed_on_the_request_path_converges_with_one_answer(tmp_path, point):
    world = asking_world(tmp_path, ASK_OR_USE if point == "request:before-reply" else ASKING_THEN_EXITING)
    go = start_faulted(world, point)
    if point == "go:before-answered":
        assert wait_until(lambda: open_questions(world), timeout=60)
        (question,) = open_questions(world)
        assert world.run("answer", question["question_id"], "bob").returncode == 0
    out, err = go.communicate(timeout=180)
    assert go.returncode == -9, err + out  # killed at the point
    resumed = start_faulted(world, None, "go", "--resume", "r1", "--json")
    answer_each_question(world, resumed)
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err + out
    assert_one_answer_per_question_and_delivered(world, json.loads(out))
    assert len(world.events("QuestionAsked")) == 1  # the question asked before the kill is the one answered


def test_an_answer_killed_after_it_is_recorded_is_given_again_and_recorded_once(tmp_path):
    world = asking_world(tmp_path, ASK_OR_USE)
    go = start_faulted(world, None)
    try:
        assert wait_until(lambda: open_questions(world), timeout=60)
        (question,) = open_questions(world)
        killed = world.run("answer", question["question_id"], "bob", fault="answer:after-record")
        assert killed.returncode == -9
        again = world.run("answer", question["question_id"], "bob")
        assert again.returncode == 0, again.stderr
        out, err = go.communicate(timeout=180)
    finally:
        stop(go)
    assert go.returncode == 0, err + out
    assert_one_answer_per_question_and_delivered(world, json.loads(out))


@pytest.mark.parametrize("seed", [20261203, 20261205])
def test_docket_go_killed_at_a_random_moment_of_asking_and_answering_converges(tmp_path, seed):
    import random
    import time

    rng = random.Random(seed)
    world = asking_world(tmp_path, ASK_OR_USE)
    go = start_faulted(world, None)
    answer_at = rng.uniform(0.5, 4.0)
    kill_at = rng.uniform(0.5, 6.0)
    started = time.monotonic()
    answered = False
    while go.poll() is None and time.monotonic() - started < kill_at:
        if not answered and time.monotonic() - started >= answer_at:
            for question in open_questions(world):
                answered = world.run("answer", question["question_id"], "bob").returncode == 0
        time.sleep(0.05)
    if go.poll() is None:
        kill(go)
        resumed = start_faulted(world, None)  # the same command again goes on with the run (or opens it, if killed
    else:                                     # before it was)
        resumed = go
    answer_each_question(world, resumed)
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err + out
    assert_one_answer_per_question_and_delivered(world, json.loads(out))


# The agent: reports its cost so far through its channel, then works on (until docket stops it).
REPORTING = '''
import subprocess, sys, time
done = subprocess.run([sys.executable, "-m", "docket", "request", "progress", "half way", "--cost", "3.00",
                       "--input-tokens", "1000", "--output-tokens", "200"], capture_output=True, text=True)
print("progress:", done.returncode, done.stdout.strip(), done.stderr.strip(), flush=True)
time.sleep(120)
'''


def test_an_agent_whose_reported_progress_passes_max_cost_is_stopped_and_the_run_is_budget_limited(tmp_path):
    world = asking_world(tmp_path, REPORTING, idle_timeout="5m")
    go = world.start("go", "--goal", "spend", "--tasks", "tasks.toml", "--id", "r1", "--agent", "asker",
                     "--max-cost", "2.50", "--json")
    try:
        out, err = go.communicate(timeout=180)
    finally:
        stop(go)
    assert go.returncode == 7, err + out
    summary = json.loads(out)
    assert (summary["status"], summary["limited_by"]) == ("budget-limited", "cost")
    (progress,) = world.events("ProgressReported")
    assert (progress["payload"]["summary"], progress["payload"]["cost_micro_usd"]) == ("half way", 3_000_000)
    (stopped,) = world.events("RunUsageExhausted")
    assert stopped["payload"] == {"run_id": "r1", "limit": "cost", "max": 2_500_000, "used": 3_000_000}
    assert [e["payload"]["cause"] for e in world.events("WorkerExited")] == ["budget"]
    status = world.json("status", "r1")
    assert status["run"]["spend"]["cost_micro_usd"] == 3_000_000
    assert status["tasks"][0]["spend"]["tokens"] == 1200
    assert world.run("verify").returncode == 0
    assert wait_until(lambda: docket_processes(world.ledger) == [], timeout=20)


def test_a_question_asked_fires_its_hook_with_the_question(tmp_path):
    out = tmp_path / "hook-out"  # a hook writes only what its table's write extras name: not the repository
    out.mkdir()
    asked = out / "asked.json"
    world = asking_world(tmp_path, ASKING, extra=f'\n[hooks]\nquestion-asked = {{ command = ["sh", "-c", '
                                                 f'"cat > {asked}"], write = ["{out}"] }}\n')
    go = start_go(world)
    try:
        assert wait_until(lambda: asked.exists() and asked.read_text(), timeout=60)
        (question,) = open_questions(world)
        fired = json.loads(asked.read_text())
        assert (fired["type"], fired["payload"]["question"], fired["payload"]["request_key"]) == (
            "QuestionAsked.v1", "Which name?", question["question_id"])
        assert world.run("answer", question["question_id"], "--choice", "1").returncode == 0
        out, err = go.communicate(timeout=180)
    finally:
        stop(go)
    assert go.returncode == 0, err + out
    assert [e["payload"]["result"] for e in world.events("HookFinished")] == ["succeeded"]


def test_a_deadline_answers_with_the_first_choice_when_its_policy_is_a_default(tmp_path):
    world = asking_world(tmp_path, ASKING, extra='\n[inbox]\ndeadline = "2s"\non_deadline = "default"\n'
                                                 'default_answer = "Decide yourself."\n')
    go = start_go(world)
    out, err = go.communicate(timeout=180)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "name.py") == "NAME = 'ada'\n"
    (answer,) = world.events("QuestionAnswered")
    assert (answer["payload"]["answered_by"], answer["payload"]["via"], answer["payload"]["choice"]) == (
        "docket", "deadline", 1)


def test_a_deadline_whose_policy_is_to_fail_fails_the_task(tmp_path):
    world = asking_world(tmp_path, ASKING, extra='\n[inbox]\ndeadline = "2s"\non_deadline = "fail"\n')
    go = start_go(world)
    out, err = go.communicate(timeout=180)
    (row,) = json.loads(out)["tasks"]
    assert (row["result"], row["code"]) == ("failed", "question-expired"), err + out
    assert len(world.events("QuestionExpired")) == 1 and world.events("QuestionAnswered") == []
    assert open_questions(world) == []


HOSTILE = "\x1b]0;owned\x07Which name?\nrun r9: all delivered \x1b[2J"

ASKING_HOSTILE = f'''
import subprocess, sys
subprocess.run([sys.executable, "-m", "docket", "request", "ask", {HOSTILE!r}, "--choice", "\\x1b[31mred", "--no-wait"])
'''


def test_a_question_with_terminal_escapes_is_shown_escaped_and_an_agent_cannot_answer_it(tmp_path):
    world = asking_world(tmp_path, ASKING_HOSTILE)
    go = start_go(world)
    try:
        assert wait_until(lambda: open_questions(world), timeout=60)
        (question,) = open_questions(world)
        assert question["question"] == HOSTILE and question["choices"] == ["\x1b[31mred"]  # exact in JSON
        shown = world.run("inbox")
        assert shown.returncode == 0 and "\x1b" not in shown.stdout and "\x07" not in shown.stdout
        assert "run r9: all delivered" not in shown.stdout.splitlines()  # no forged line
        import subprocess

        inside = subprocess.run(world.argv("answer", question["question_id"], "ada"), cwd=world.repo,
                                env=dict(world.env, DOCKET_WORKER="r1.name"), capture_output=True, text=True)
        assert inside.returncode == 3 and inside.stderr.startswith("docket: error: answer-from-agent: ")
        assert world.events("QuestionAnswered") == []
    finally:
        stop(go)


# The agent: asks (once a generation, unless its prompt has the answer), then writes a name its check refuses the
# first time: the retry is told the answer it was given and does not ask again.
ASK_THEN_RETRY = NAME_FROM_PROMPT_OR_ASKED + '''broken = "Your previous attempt" not in prompt
open("name.py", "w").write(f"NAME = {name!r}" + (" broken" if broken else "") + "\\n")
'''


def test_a_retry_after_a_failed_check_is_told_the_answers_and_does_not_ask_again(tmp_path):
    world = asking_world(tmp_path, ASK_THEN_RETRY)
    go = start_go(world)
    try:
        assert wait_until(lambda: open_questions(world), timeout=60)
        (question,) = open_questions(world)
        assert world.run("answer", question["question_id"], "bob").returncode == 0
        out, err = go.communicate(timeout=180)
    finally:
        stop(go)
    assert go.returncode == 0, err + out
    (row,) = json.loads(out)["tasks"]
    assert (row["result"], row["cycles"]) == ("delivered", 2)
    assert world.file_at("main", "name.py") == "NAME = 'bob'\n"
    assert len(world.events("QuestionAsked")) == 1  # generation 2 was told, and did not ask
