"""Use cases of the inbox: a worker's request recorded and replied to, a question answered, a deadline applied.

A request comes through the channel bound to one worker generation (``adapters/world/processes/request_channel.py``), which
names the binding; nothing the agent sends can name another. Each is decided in the ledger's write transaction
(``domain.requests``), so two copies of one request racing record it once, and two answers racing record one.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ....domain import requests as rq
from ....domain import worker as worker_aggregate
from ....domain.kernel.errors import Refused
from ....domain.events import Event
from ...world import faults
from ...world.clock import Clock
from ..kernel.ledger import Ledger
from .runs import load_run
from ....domain.kernel.codes import Code

_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_REQUESTS = 1000  # distinct requests one generation may make: what an agent can add to the ledger is bounded

__all__ = ["GenerationRequests", "answer_question", "apply_deadlines", "earlier_answers", "load_request", "local_user",
           "questions_of", "receive_request", "serve_request", "undecided_proposals"]


def local_user() -> str:
    """Who runs this process, as the system names its user: the identity a plain `docket answer` records."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid-{os.getuid()}"


def load_request(ledger: Ledger, key: str) -> rq.Request | None:
    return ledger.get(rq.apply, rq.stream_of(key))


def receive_request(ledger: Ledger, clock: Clock, binding: rq.Binding, request_id: str, kind: str,
                    raw: Mapping[str, Any], policy: rq.InboxPolicy, *, docket_dir: Path | None = None) -> rq.Reply:
    """Record the request (once), and what it gets back now: recorded, waiting, its answer, or refused. A proposed
    follow-up's prompt is kept beside the ledger (docket_dir) first: the policy may make it a task at once."""
    key = rq.request_key(binding.worker_id, binding.generation, request_id)
    if kind == "propose" and docket_dir is not None:
        _keep_prompt(docket_dir, raw.get("prompt"))

    def decision(now: str) -> list[Event]:
        worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(binding.worker_id))
        current = None if worker is None or (worker.status == "lost" and worker.generation == binding.generation) \
            else worker.generation
        return rq.receive(load_request(ledger, key), current, load_run(ledger, binding.run_id), binding, request_id,
                          kind, raw, policy, now)

    appended = ledger.decide(decision, clock.now())
    if kind == "progress" and appended:  # what it reports it used counts against the run's limits at once
        from .usage import stop_when_spent

        stop_when_spent(ledger, clock, binding.run_id)
    return rq.reply(load_request(ledger, key), kind, raw)


def _keep_prompt(docket_dir: Path, prompt: Any) -> None:
    """Store a follow-up's prompt by its digest, where a worker reads it (a prompt too long is refused anyway)."""
    if isinstance(prompt, str) and 0 < len(prompt) <= rq.MAX_TEXT and "\x00" not in prompt:
        from ...world.files.prompts import store_prompt

        store_prompt(docket_dir, prompt)


class GenerationRequests:
    """One worker generation's requests as its channel serves them, decided on a ledger connection of the channel's
    own thread; the questions it asked, so its supervisor knows when it waits for an answer."""

    def __init__(self, ledger: Ledger, clock: Clock, binding: rq.Binding, policy: rq.InboxPolicy, *,
                 max_requests: int = MAX_REQUESTS, docket_dir: Path | None = None) -> None:
        self._ledger = ledger
        self._docket_dir = docket_dir
        self._clock = clock
        self.binding = binding
        self._policy = policy
        self._max_requests = max_requests
        self._connection: Ledger | None = None
        self._asked: set[str] = set()
        self._seen: set[str] = set()  # the request ids served: a flood of new ones is refused, not recorded
        self._lock = threading.Lock()

    def handle(self, document: dict[str, Any]) -> dict[str, Any]:
        request_id = document.get("request_id")
        if request_id not in self._seen:
            if len(self._seen) >= self._max_requests:
                return {"status": "refused", "code": "too-many-requests",
                        "message": f"this generation made {self._max_requests} requests; no more are taken"}
            if isinstance(request_id, str) and _REQUEST_ID.match(request_id):
                self._seen.add(request_id)
        if self._connection is None:
            self._connection = self._ledger.connection()
        reply = serve_request(self._connection, self._clock, self.binding, self._policy, document,
                              docket_dir=self._docket_dir)
        faults.crash_point("request:before-reply")
        if document.get("kind") == "ask" and reply.get("request"):
            with self._lock:
                self._asked.add(reply["request"])
        return reply

    def replied(self, reply: dict[str, Any]) -> None:
        """An answer was sent to the agent: AnswerDelivered, once (after the reply: an answer recorded as delivered
        has reached the agent; one sent but not recorded is told again to the next generation)."""
        if reply.get("status") != "answered" or self._connection is None:
            return
        key = str(reply.get("request"))
        self._connection.decide(lambda now: rq.deliver(load_request(self._connection, key), now),  # type: ignore
                                self._clock.now())

    def stopped(self) -> None:
        """The channel stopped serving: its connection is closed (in the channel's thread, which opened it)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def waiting_questions(self, ledger: Ledger) -> list[rq.Request]:
        """The questions this generation asked whose answers have not reached it yet: unanswered, or answered and
        not yet delivered (the agent asks again every few seconds). Read through ledger."""
        with self._lock:
            keys = sorted(self._asked)
        found = [load_request(ledger, key) for key in keys]
        return [q for q in found if q is not None and (q.status == "open" or (q.status == "answered"
                                                                              and not q.delivered))]


def serve_request(ledger: Ledger, clock: Clock, binding: rq.Binding, policy: rq.InboxPolicy,
                  document: Mapping[str, Any], *, docket_dir: Path | None = None) -> dict[str, Any]:
    """The channel's reply to one request it received (a JSON object: kind, request_id and the kind's fields)."""
    from ....domain.kernel.errors import DocketError

    kind, request_id = document.get("kind"), document.get("request_id")
    if not isinstance(request_id, str) or not _REQUEST_ID.match(request_id):
        return {"status": "refused", "code": "bad-request",
                "message": "request_id is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"}
    raw = {k: v for k, v in document.items() if k not in ("kind", "request_id")}
    try:
        return receive_request(ledger, clock, binding, request_id, str(kind), raw, policy,
                               docket_dir=docket_dir).document()
    except DocketError as e:
        return {"status": "refused", "code": str(e.code), "message": e.message}


def answer_question(ledger: Ledger, clock: Clock, key: str, *, text: str | None, choice: int | None, by: str,
                    trusted: Iterable[str], via: str = "cli", docket_dir: Path | None = None) -> rq.Request:
    """Record the question's answer, or the decision on a queued follow-up (accept or refuse: its prompt is kept
    beside the ledger in docket_dir first), by someone trusted (the local user, or one of trusted); the request as it
    stands then. An answer from anyone else is recorded as refused, then refused (untrusted-answerer)."""
    from ....domain import follow_ups

    allowed = by == local_user() or by in set(trusted)
    seen = load_request(ledger, key)
    proposal = seen is not None and seen.kind == "propose" and seen.status != "refused"
    accept = follow_ups.choice_of(text, choice) if proposal else False
    if proposal and accept and docket_dir is not None:
        _keep_prompt(docket_dir, seen.prompt)  # type: ignore[union-attr]

    def decision(now: str) -> list[Event]:
        question = load_request(ledger, key)
        run = load_run(ledger, question.run_id) if question is not None else None
        if proposal:
            return rq.decide_follow_up(question, run, accept=accept, by=by, trusted=allowed,  # type: ignore
                                       via=via, now=now)  # type: ignore[arg-type]
        return rq.answer(question, run, text=text, choice=choice, by=by, trusted=allowed, via=via,  # type: ignore
                         now=now)

    appended = ledger.decide(decision, clock.now())
    if any(type(event).name == "AnswerRefused" for _, event in appended) or not allowed:
        raise Refused(Code.UNTRUSTED_ANSWERER, f"{by} may not answer: only the local user ({local_user()}) and the "
                                            "identities [inbox] trusted names may")
    question = load_request(ledger, key)
    assert question is not None
    return question


def questions_of(ledger: Ledger, worker_id: str, generation: int) -> list[rq.Request]:
    """The questions the worker's generation asked, as they stand now, in the order asked."""
    from ....domain import events as ev

    keys = [e.request_key for _, e in ledger.events_of(ev.QuestionAsked)
            if e.worker_id == worker_id and e.generation == generation]
    found = [load_request(ledger, key) for key in keys]
    return [q for q in found if q is not None]


def earlier_answers(ledger: Ledger, worker_id: str, generation: int) -> list[tuple[str, str, str]]:
    """(question, answer, who answered) of each question the worker's generations before this one asked and were
    answered, in the order asked: what the next generation is told, so that it does not ask again."""
    from ....domain import events as ev

    keys = [e.request_key for _, e in ledger.events_of(ev.QuestionAsked)
            if e.worker_id == worker_id and e.generation < generation]
    found = [load_request(ledger, key) for key in keys]
    return [(q.question or "", q.answer or "", q.answered_by or "") for q in found
            if q is not None and q.status == "answered"]


def apply_deadlines(ledger: Ledger, clock: Clock, keys: Iterable[str]) -> list[str]:
    """Apply each open question's passed deadline (its default answer, or its expiry); the keys that changed."""
    from ....domain.kernel.values import to_ms

    changed = []
    for key in keys:
        seen = load_request(ledger, key)
        if seen is None or seen.deadline_at is None or to_ms(clock.now()) < to_ms(seen.deadline_at):
            continue  # nothing to record: no write transaction taken

        def decision(now: str, key: str = key) -> list[Event]:
            question = load_request(ledger, key)
            if question is None:
                return []
            return rq.expire(question, load_run(ledger, question.run_id), now)

        if ledger.decide(decision, clock.now()):
            changed.append(key)
    return changed


def undecided_proposals(ledger: Ledger, run_id: str) -> list[rq.Request]:
    """The run's proposed follow-ups its policy queued that no one has decided yet: the run waits for them."""
    from ....domain import events as ev

    keys = [e.request_key for _, e in ledger.events_of(ev.FollowUpProposed)
            if e.run_id == run_id and e.decision == "queued"]
    found = [load_request(ledger, key) for key in keys]
    return [p for p in found if p is not None and p.decision == "queued"]
