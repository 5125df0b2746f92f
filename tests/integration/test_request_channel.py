"""A worker generation's request channel: a real socket, a real ledger file, `docket request` as the agent runs it.

The channel stands in for the one `docket go` serves (adapters/service_layer/use_cases/workers.py: _open_channel): the
same GenerationRequests, bound to one worker generation, and the same peer check, here against this test's own
process (the clients are its children) or against a process the clients do not descend from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.use_cases.requests import GenerationRequests, answer_question, local_user
from docket.adapters.service_layer.use_cases.tasks import plan_task
from docket.adapters.service_layer.use_cases.worker_generations import register_worker
from docket.adapters.world.clock import FixedClock
from docket.adapters.world.processes.request_channel import RequestChannel, descends_from, send
from docket.domain import requests as rq
from docket.domain import run, worker
from docket.domain.kernel.errors import Refused

from ..unit.builders import COMMIT, T0

REPOSITORY = "/work/repo/.git"
BINDING = rq.Binding("r1", "t1", "w1", 1)


def _start_time(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rindex(b")") + 2:].split()[19].decode()


@pytest.fixture
def ledger(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    clock = FixedClock(T0)
    ledger.initialise(T0, "repo-" + "1" * 32, REPOSITORY)
    ledger.decide(lambda now: run.open_run("r1", "i1", "g", "main", None, REPOSITORY, now), T0)
    ledger.decide(lambda now: run.record_base_pin(ledger.get(run.apply, run.stream_of("r1")), "i1", now,
                                                  commit=COMMIT), T0)
    plan_task(ledger, clock, "r1", "t1", "task t1")
    register_worker(ledger, clock, "r1", "w1", "implementer", "t1")
    yield ledger
    ledger.close()


def serve(ledger: Ledger, folder: Path, *, ancestor: int | None = None,
          policy: rq.InboxPolicy = rq.InboxPolicy()) -> RequestChannel:
    pid = os.getpid() if ancestor is None else ancestor
    start = _start_time(pid)
    requests = GenerationRequests(ledger, FixedClock(T0), BINDING, policy)
    folder.mkdir(parents=True, exist_ok=True)
    return RequestChannel(folder / "docket.sock", requests, lambda peer: descends_from(peer, pid, start))


def request(channel: RequestChannel, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKET_REQUESTS": str(channel.path)}
    return subprocess.run([sys.executable, "-m", "docket", "request", *args, "--json"], env=env,
                          capture_output=True, text=True, timeout=60)


def events(ledger: Ledger, *names: str) -> list:
    from docket.domain import events as ev

    return [e for _, e in ledger.events_of(*(getattr(ev, n) for n in names))]


def test_the_same_request_twice_is_one_question_and_other_content_under_its_id_is_refused_once(ledger, tmp_path):
    channel = serve(ledger, tmp_path / "w1" / "1")
    try:
        first = request(channel, "ask", "Which database?", "--choice", "sqlite", "--choice", "postgres",
                        "--reason", "choice", "--id", "q1", "--no-wait")
        second = request(channel, "ask", "Which database?", "--choice", "sqlite", "--choice", "postgres",
                         "--reason", "choice", "--id", "q1", "--no-wait")
        assert first.returncode == second.returncode == 0, first.stderr + second.stderr
        assert json.loads(first.stdout) == json.loads(second.stdout) == {
            "status": "waiting", "request": rq.request_key("w1", 1, "q1")}
        for _ in range(2):
            conflict = request(channel, "ask", "Which cache?", "--id", "q1", "--no-wait")
            assert conflict.returncode == 3
            assert conflict.stderr.startswith("docket: error: request-id-conflict: ")
    finally:
        channel.close()
    (asked,) = events(ledger, "QuestionAsked")
    assert (asked.question, asked.choices, asked.reason, asked.worker_id, asked.generation, asked.task_id) == (
        "Which database?", ["sqlite", "postgres"], "choice", "w1", 1, "t1")
    assert [e.code for e in events(ledger, "RequestRefused")] == ["request-id-conflict"]


def test_copies_of_one_request_racing_record_it_once(ledger, tmp_path):
    channel = serve(ledger, tmp_path / "w1" / "1")
    env = {**os.environ, "DOCKET_REQUESTS": str(channel.path)}
    argv = [sys.executable, "-m", "docket", "request", "ask", "Go on?", "--id", "race", "--no-wait", "--json"]
    try:
        racing = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(6)]
        replies = [p.communicate(timeout=60) for p in racing]
    finally:
        channel.close()
    assert [p.returncode for p in racing] == [0] * 6, replies
    assert {out for out, _ in replies} == {replies[0][0]} and json.loads(replies[0][0])["status"] == "waiting"
    assert len(events(ledger, "QuestionAsked")) == 1


def test_a_fenced_generations_request_is_refused_and_the_refusal_recorded(ledger, tmp_path):
    channel = serve(ledger, tmp_path / "w1" / "1")
    try:
        asked = request(channel, "ask", "Go on?", "--id", "q1", "--no-wait")
        assert asked.returncode == 0, asked.stderr
        ledger.decide(lambda now: worker.relaunch(ledger.get(worker.apply, worker.stream_of("w1")),
                                                  ledger.get(run.apply, run.stream_of("r1")), now), T0)
        for args in (("ask", "Go on?", "--id", "q1"), ("progress", "half way", "--id", "p1")):
            refused = request(channel, *args, "--no-wait") if args[0] == "ask" else request(channel, *args)
            assert refused.returncode == 3
            assert refused.stderr.startswith("docket: error: stale-generation: ")
    finally:
        channel.close()
    assert [(e.request_id, e.code) for e in events(ledger, "RequestRefused")] == [("q1", "stale-generation"),
                                                                                  ("p1", "stale-generation")]
    assert events(ledger, "ProgressReported") == []


def test_a_process_that_is_not_the_generations_agent_nor_its_descendant_is_refused(ledger, tmp_path):
    stranger = subprocess.Popen(["sleep", "60"])
    channel = serve(ledger, tmp_path / "w1" / "1", ancestor=stranger.pid)
    try:
        refused = request(channel, "ask", "Whose task is this?", "--no-wait")
        direct = send(channel.path, {"kind": "progress", "request_id": "p1", "summary": "x"})
    finally:
        channel.close()
        stranger.kill()
        stranger.wait()
    assert refused.returncode == 3 and refused.stderr.startswith("docket: error: not-this-worker: ")
    assert direct["code"] == "not-this-worker"
    assert events(ledger, "QuestionAsked", "ProgressReported", "RequestRefused") == []


def test_a_channel_deep_in_the_file_system_is_served_and_reached(ledger, tmp_path):
    folder = tmp_path / ("deep-" * 30) / "w1" / "1"
    assert len(str(folder / "docket.sock")) > 108  # beyond what a socket address holds
    channel = serve(ledger, folder)
    try:
        done = request(channel, "finish", "all done", "--id", "f1")
    finally:
        channel.close()
    assert done.returncode == 0, done.stderr
    assert [e.summary for e in events(ledger, "WorkFinished")] == ["all done"]
    assert not (folder / "docket.sock").exists()  # removed when closed


@pytest.mark.parametrize("document, code", [
    ({"kind": "ask", "request_id": "../x", "question": "q"}, "bad-request"),
    ({"kind": "ask", "request_id": "q1", "question": "q", "run_id": "r9"}, "bad-request"),
    ({"kind": "ask", "request_id": "q1", "question": "q", "generation": 7}, "bad-request"),
    ({"kind": "sing", "request_id": "q1"}, "bad-request"),
    ({"kind": "ask", "request_id": "q1", "question": "x" * 5000}, "bad-request"),
])
def test_a_request_cannot_name_its_binding_and_bad_ones_are_answered_not_recorded(ledger, tmp_path, document, code):
    channel = serve(ledger, tmp_path / "w1" / "1")
    try:
        reply = send(channel.path, document)
    finally:
        channel.close()
    assert (reply["status"], reply["code"]) == ("refused", code)
    assert events(ledger, "QuestionAsked", "RequestRefused") == []


def test_an_oversized_or_broken_request_is_refused_and_the_channel_serves_on(ledger, tmp_path):
    import socket

    channel = serve(ledger, tmp_path / "w1" / "1")
    try:
        for payload in (b"x" * (70 * 1024) + b"\n", b"[1, 2]\n", b"{not json\n", b"\n"):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(10)
                s.connect(str(channel.path))
                s.sendall(payload)
                reply = json.loads(s.makefile().readline())
            assert (reply["status"], reply["code"]) == ("refused", "bad-request")
        assert send(channel.path, {"kind": "finish", "request_id": "f", "summary": "ok"})["status"] == "recorded"
    finally:
        channel.close()


def test_a_trusted_answer_reaches_the_asking_agent_and_an_untrusted_one_is_refused_and_recorded(ledger, tmp_path):
    channel = serve(ledger, tmp_path / "w1" / "1")
    clock = FixedClock(T0)
    try:
        assert request(channel, "ask", "Which?", "--choice", "a", "--choice", "b", "--id", "q1",
                       "--no-wait").returncode == 0
        key = rq.request_key("w1", 1, "q1")
        with pytest.raises(Refused) as refused:
            answer_question(ledger, clock, key, text="a", choice=None, by="mallory", trusted=["ada"])
        assert refused.value.code == "untrusted-answerer"
        assert json.loads(request(channel, "ask", "Which?", "--choice", "a", "--choice", "b", "--id", "q1",
                                  "--no-wait").stdout)["status"] == "waiting"
        answered = answer_question(ledger, clock, key, text=None, choice=2, by="ada", trusted=["ada"])
        assert (answered.answer, answered.answered_by) == ("b", "ada")
        waited = request(channel, "ask", "Which?", "--choice", "a", "--choice", "b", "--id", "q1")
    finally:
        channel.close()
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout) == {"status": "answered", "request": key, "answer": "b", "choice": 2,
                                         "answered_by": "ada"}
    assert [(e.answered_by, e.code) for e in events(ledger, "AnswerRefused")] == [("mallory", "untrusted-answerer")]
    assert [(e.answer, e.answered_by) for e in events(ledger, "QuestionAnswered")] == [("b", "ada")]


def test_answers_racing_record_exactly_one(ledger, tmp_path):
    channel = serve(ledger, tmp_path / "w1" / "1")
    try:
        assert request(channel, "ask", "Which?", "--id", "q1", "--no-wait").returncode == 0
    finally:
        channel.close()
    key = rq.request_key("w1", 1, "q1")
    outcomes: list[str] = []

    def answer(text: str) -> None:
        connection = ledger.connection()
        try:
            answer_question(connection, FixedClock(T0), key, text=text, choice=None, by=local_user(), trusted=[])
            outcomes.append("answered")
        except Refused as e:
            outcomes.append(e.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=answer, args=(f"answer {i}",)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["already-answered"] * 4 + ["answered"]
    assert len(events(ledger, "QuestionAnswered")) == 1


def test_a_flood_of_new_requests_is_refused_past_the_bound_and_not_recorded(ledger, tmp_path):
    requests = GenerationRequests(ledger, FixedClock(T0), BINDING, rq.InboxPolicy(), max_requests=3)
    pid, start = os.getpid(), _start_time(os.getpid())
    (tmp_path / "w1" / "1").mkdir(parents=True)
    channel = RequestChannel(tmp_path / "w1" / "1" / "docket.sock", requests, lambda p: descends_from(p, pid, start))
    try:
        replies = [send(channel.path, {"kind": "progress", "request_id": f"p{i}", "summary": f"step {i}"})
                   for i in range(6)]
        again = send(channel.path, {"kind": "progress", "request_id": "p1", "summary": "step 1"})
    finally:
        channel.close()
    assert [r["status"] for r in replies] == ["recorded"] * 3 + ["refused"] * 3
    assert {r.get("code") for r in replies[3:]} == {"too-many-requests"}
    assert again["status"] == "recorded"  # a request made before is answered as ever
    assert [e.request_id for e in events(ledger, "ProgressReported")] == ["p0", "p1", "p2"]
    assert events(ledger, "RequestRefused") == []


def test_a_docket_without_a_script_of_its_own_is_one_program_for_the_agent_all_the_same(tmp_path, monkeypatch):
    """Codex CLI's block names docket's MCP server by one program ({docket}): a docket run as `python -m docket`
    (no script beside its interpreter) gets a two-line script in the worker's folder that runs it."""
    from docket.adapters.world.processes import request_channel

    assert request_channel.docket_program(tmp_path) == Path(request_channel.docket_command()[0])  # its own script
    monkeypatch.setattr(request_channel, "docket_command", lambda: [sys.executable, "-m", "docket"])
    program = request_channel.docket_program(tmp_path)
    assert program == tmp_path / "docket" and program.stat().st_mode & 0o777 == 0o700
    again = request_channel.docket_program(tmp_path)  # a launch replayed after a crash writes it afresh
    assert again == program
    done = subprocess.run([str(program), "request", "progress", "x"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "DOCKET_REQUESTS"})
    assert done.returncode != 0 and "docket: error:" in done.stderr  # docket itself answered: no channel here
