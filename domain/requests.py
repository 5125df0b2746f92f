"""A worker's request to docket, and a question's answer: decided once, the same reply every time after. Pure.

An agent asks through a channel bound to its worker generation (``adapters/world/processes/request_channel.py``): ask a
person (a question), report progress, propose a follow-up task, say it is done. Each request carries an id the
agent chose. The same id with the same content is one request: it is recorded once and gets the same reply every
time (a question's reply is "waiting" until it is answered, then its answer). The same id with other content is
refused (request-id-conflict), as is every request of a generation that is fenced (stale-generation); a refusal
is recorded once per content.

A question is answered once, by the local user or an identity the run's [inbox] trusted names; an answer from
anyone else is refused and the refusal recorded. A question whose deadline passes is answered by its policy's
default, or expires and fails its generation, or waits on.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from . import events as ev, follow_ups
from .aggregate import next_event
from .kernel.canonical import canonical_json
from .kernel.errors import BadInput, NotFound, Refused
from .run import Run, require_open
from .kernel.streams import request_stream as stream_of
from .kernel.values import add_ms, to_ms, MAX_SAFE_INT
from .kernel.codes import Code

__all__ = [
    "KINDS",
    "MAX_TEXT",
    "Binding",
    "InboxPolicy",
    "Reply",
    "Request",
    "answer",
    "apply",
    "content_sha256",
    "decide_follow_up",
    "deliver",
    "expire",
    "receive",
    "reply",
    "request_key",
    "stream_of",
]

# A request id reused with other content is refused each time; the ledger records the first refusals of one request
# only (a flood of new contents on one id would otherwise grow the ledger, and every receipt citing it, without end).
MAX_REFUSALS_RECORDED = 16

KINDS = ("ask", "progress", "propose", "finish")
REASONS = ("blocked", "choice", "approval")
MAX_CHOICES = 20
MAX_TEXT = 4000  # characters of a question, an answer, a summary or a prompt
DEADLINE_ANSWERER = "docket"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def request_key(worker_id: str, generation: int, request_id: str) -> str:
    """The request's key in docket: the same worker, generation and request id always give the same key."""
    digest = hashlib.sha256(f"{worker_id}\0{generation}\0{request_id}".encode()).digest()
    return "req-" + base64.b32encode(digest).decode().lower()[:16]


def content_sha256(kind: str, content: Mapping[str, Any]) -> str:
    """The digest of what the agent asked: its kind and fields, as canonical JSON."""
    return hashlib.sha256(canonical_json({"kind": kind, **content})).hexdigest()


@dataclass(frozen=True)
class Binding:
    """Who a request comes from, as the channel it came through says (never as the agent says)."""

    run_id: str
    task_id: str
    worker_id: str
    generation: int


@dataclass(frozen=True)
class InboxPolicy:
    """The run's [inbox] settings a request is decided by."""

    deadline_ms: int | None = None  # a question's deadline after it is asked (None: none)
    on_deadline: Literal["wait", "default", "fail"] = "wait"
    default_answer: str | None = None  # a deadline's answer to a question without choices
    proposals: Literal["accept", "queue", "refuse"] = "queue"


@dataclass(frozen=True)
class Request:
    key: str
    version: int
    kind: str
    run_id: str
    task_id: str
    worker_id: str
    generation: int
    request_id: str
    content_sha256: str
    status: Literal["refused", "recorded", "open", "answered", "expired"]
    code: str | None = None  # the first refusal's code, when the request itself was refused
    message: str | None = None
    asked_at: str | None = None
    question: str | None = None
    reason: str | None = None
    choices: tuple[str, ...] = ()
    deadline_at: str | None = None
    on_deadline: str = "wait"
    default_answer: str | None = None
    answer: str | None = None
    choice: int | None = None
    answered_by: str | None = None
    answered_at: str | None = None
    delivered: bool = False  # its answer reached the agent (AnswerDelivered)
    decision: str | None = None  # a proposal's: accepted, queued (for a person) or refused
    title: str | None = None  # a proposal's task
    prompt: str | None = None
    depends_on: tuple[str, ...] = ()
    decided_by: str | None = None  # who decided a queued proposal (FollowUpDecided)
    added_task: str | None = None  # the task a proposal a person accepted became
    refused: frozenset[str] = field(default_factory=frozenset)  # "code content-digest" of each refusal recorded


_RECORDED = {"QuestionAsked": "open", "ProgressReported": "recorded", "FollowUpProposed": "recorded",
             "WorkFinished": "recorded"}
_KIND_OF = {"QuestionAsked": "ask", "ProgressReported": "progress", "FollowUpProposed": "propose",
            "WorkFinished": "finish"}


def apply(request: Request | None, event: ev.Event, position: int) -> Request:
    name = type(event).name
    if request is None:
        p: Any = event
        status = "refused" if name == "RequestRefused" else _RECORDED[name]
        request = Request(key=p.request_key, version=event.version, kind=p.kind if status == "refused" else
                          _KIND_OF[name], run_id=p.run_id, task_id=p.task_id, worker_id=p.worker_id,
                          generation=p.generation, request_id=p.request_id, content_sha256=p.content_sha256,
                          status=status)  # type: ignore[arg-type]
        if status == "refused":
            return replace(request, code=p.code, message=p.message, refused=frozenset({f"{p.code} {p.content_sha256}"}))
        if isinstance(event, ev.QuestionAsked):
            return replace(request, asked_at=event.recorded_at, question=event.question, reason=event.reason,
                           choices=tuple(event.choices), deadline_at=event.deadline_at,
                           on_deadline=event.on_deadline, default_answer=event.default_answer)
        if isinstance(event, ev.FollowUpProposed):
            return replace(request, decision=event.decision, title=event.title, prompt=event.prompt,
                           depends_on=tuple(event.depends_on), message=event.message)
        return request
    request = replace(request, version=event.version)
    if isinstance(event, ev.QuestionAnswered):
        return replace(request, status="answered", answer=event.answer, choice=event.choice,
                       answered_by=event.answered_by, answered_at=event.recorded_at)
    if isinstance(event, ev.QuestionExpired):
        return replace(request, status="expired")
    if isinstance(event, ev.AnswerDelivered):
        return replace(request, delivered=True)
    if isinstance(event, ev.FollowUpDecided):
        return replace(request, decision=event.decision, decided_by=event.decided_by, added_task=event.task_id)
    if isinstance(event, ev.RequestRefused):
        return replace(request, refused=request.refused | {f"{event.code} {event.content_sha256}"})
    return request  # AnswerRefused: the question is as it was


@dataclass(frozen=True)
class Reply:
    """What the channel answers: status is recorded, waiting, answered, expired or refused."""

    status: str
    request: str | None = None  # the request's key
    answer: str | None = None
    choice: int | None = None
    answered_by: str | None = None
    decision: str | None = None
    code: str | None = None
    message: str | None = None

    def document(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _content(kind: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The request's fields, checked and normalised (BadInput naming the first wrong one)."""
    def text(name: str, limit: int = MAX_TEXT, required: bool = True) -> str | None:
        value = raw.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip() or len(value) > limit or "\x00" in value:
            raise BadInput(Code.BAD_REQUEST, f"{name} is text of 1 to {limit} characters")
        return value

    def count(name: str) -> int | None:
        value = raw.get(name)
        if value is None:
            return None

        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAFE_INT:
            raise BadInput(Code.BAD_REQUEST, f"{name} is a whole number from 0 to {MAX_SAFE_INT}")
        return value

    allowed = {"ask": {"question", "reason", "choices"}, "progress": {"summary", "input_tokens", "output_tokens",
               "cost_micro_usd"}, "propose": {"title", "prompt", "depends_on"}, "finish": {"summary"}}
    if kind not in allowed:
        raise BadInput(Code.BAD_REQUEST, f"a request is one of {', '.join(KINDS)}, not {str(kind)[:40]!r}")
    unknown = sorted(set(raw) - allowed[kind])
    if unknown:
        raise BadInput(Code.BAD_REQUEST, f"a {kind} request has no field {unknown[0][:40]!r}")
    if kind == "ask":
        reason = raw.get("reason", "blocked")
        if reason not in REASONS:
            raise BadInput(Code.BAD_REQUEST, f"reason is one of {', '.join(REASONS)}")
        choices = raw.get("choices") or []
        if (not isinstance(choices, list) or len(choices) > MAX_CHOICES
                or not all(isinstance(c, str) and c.strip() and len(c) <= 200 and "\x00" not in c for c in choices)):
            raise BadInput(Code.BAD_REQUEST, f"choices are up to {MAX_CHOICES} texts of 1 to 200 characters")
        return {"question": text("question"), "reason": reason, "choices": choices}
    if kind == "progress":
        return {"summary": text("summary"), "input_tokens": count("input_tokens"),
                "output_tokens": count("output_tokens"), "cost_micro_usd": count("cost_micro_usd")}
    if kind == "propose":
        depends = raw.get("depends_on") or []
        if not isinstance(depends, list) or len(depends) > 100 or not all(isinstance(d, str) and _ID.match(d)
                                                                         for d in depends):
            raise BadInput(Code.BAD_REQUEST, "depends_on is a list of up to 100 task ids")
        return {"title": text("title", 200), "prompt": text("prompt"), "depends_on": depends}
    return {"summary": text("summary")}


def receive(existing: Request | None, worker_generation: int | None, run: Run, binding: Binding, request_id: str,
            kind: str, raw: Mapping[str, Any], policy: InboxPolicy, now: str) -> list[ev.Event]:
    """What a request records: itself (once), or its refusal (once per content); nothing when it was recorded
    before. worker_generation: the worker's current generation (the binding's, unless it was fenced since; None:
    the binding's generation was given up with its host)."""
    content = _content(kind, raw)
    digest = content_sha256(kind, content)
    key = request_key(binding.worker_id, binding.generation, request_id)
    stream = stream_of(key)
    version = existing.version if existing is not None else 0
    common = dict(request_key=key, run_id=binding.run_id, task_id=binding.task_id, worker_id=binding.worker_id,
                  generation=binding.generation, request_id=request_id)

    def refusal(code: str, message: str) -> list[ev.Event]:
        if existing is not None and (f"{code} {digest}" in existing.refused
                                     or len(existing.refused) >= MAX_REFUSALS_RECORDED):
            return []  # refused all the same (reply reads the content's mismatch), but a flood is not recorded
        return [next_event(ev.RequestRefused, stream, version, now, **common, kind=kind, content_sha256=digest,
                           code=code, message=message)]

    if worker_generation is None:
        return refusal("stale-generation", f"generation {binding.generation} of worker {binding.worker_id} was "
                                           "given up with its host")
    if worker_generation != binding.generation:
        return refusal("stale-generation", f"generation {binding.generation} of worker {binding.worker_id} is "
                                           f"fenced (the current generation is {worker_generation})")
    if existing is not None:
        if existing.status != "refused" and existing.content_sha256 == digest:
            return []
        return refusal("request-id-conflict", f"request {request_id} was made before with other content; a new "
                                              "request takes a new id")
    require_open(run)
    event_common = dict(common, content_sha256=digest)
    if kind == "ask":
        deadline = add_ms(now, policy.deadline_ms) if policy.deadline_ms is not None else None
        default = (content["choices"][0] if content["choices"] else policy.default_answer) \
            if policy.on_deadline == "default" else None
        return [next_event(ev.QuestionAsked, stream, 0, now, **event_common, reason=content["reason"],
                           question=content["question"], choices=content["choices"], deadline_at=deadline,
                           on_deadline=policy.on_deadline if deadline is not None else "wait",
                           default_answer=default)]
    if kind == "progress":
        return [next_event(ev.ProgressReported, stream, 0, now, **event_common, **content)]
    if kind == "propose":
        return _proposed(run, binding, key, event_common, content, policy, now)
    return [next_event(ev.WorkFinished, stream, 0, now, **event_common, **content)]


def _proposed(run: Run, binding: Binding, key: str, common: dict[str, Any], content: dict[str, Any],
              policy: InboxPolicy, now: str) -> list[ev.Event]:
    """FollowUpProposed with the policy's decision; accepted, the task it becomes is added to the run with it. One
    that cannot be added (too many, an unknown dependency, no plan) is refused, saying why."""

    decision = {"accept": "accepted", "queue": "queued", "refuse": "refused"}[policy.proposals]
    message = "the run's [inbox] proposals refuses follow-up tasks" if decision == "refused" else None
    added: list[ev.Event] = []
    try:
        if decision == "accepted":
            task_id, added = follow_ups.added_task(run, key, binding.task_id, content["title"], content["prompt"],
                                                   content["depends_on"], now,
                                                   proposal_sha256=common["content_sha256"])
            if not added:
                message = f"the same follow-up was proposed and added before: task {task_id}"
        elif decision == "queued":
            follow_ups.dependencies(run, binding.task_id, content["depends_on"])
    except Refused as e:
        decision, message, added = "refused", e.message, []
    return [next_event(ev.FollowUpProposed, stream_of(key), 0, now, **common, **content, decision=decision,
                       message=message), *added]


def reply(request: Request | None, kind: str, raw: Mapping[str, Any]) -> Reply:
    """The channel's answer to a request, once it is decided: what the request's stream says of this content."""
    digest = content_sha256(kind, _content(kind, raw))
    if request is None:
        return Reply("refused", code="not-recorded", message="the request was not recorded")
    for code, refused_digest in sorted(entry.split(" ") for entry in request.refused):
        if refused_digest == digest:
            message = request.message if request.code == code and request.message else _REFUSALS[code]
            return Reply("refused", request.key, code=code, message=message)
    if request.status == "refused" or request.content_sha256 != digest:
        return Reply("refused", request.key, code="request-id-conflict", message=_REFUSALS["request-id-conflict"])
    if request.kind == "ask":
        if request.status == "answered":
            return Reply("answered", request.key, answer=request.answer, choice=request.choice,
                         answered_by=request.answered_by)
        if request.status == "expired":
            return Reply("expired", request.key, message="the question's deadline passed unanswered")
        return Reply("waiting", request.key)
    return Reply("recorded", request.key, decision=request.decision,
                 message=request.message if request.decision == "refused" else None)


_REFUSALS = {"stale-generation": "this generation is fenced: a newer one works on the task",
             "request-id-conflict": "this request id was used before with other content"}


def answer(question: Request | None, run: Run, *, text: str | None, choice: int | None, by: str, trusted: bool,
           via: str, now: str) -> list[ev.Event]:
    """QuestionAnswered, once; AnswerRefused when who answers is not trusted (recorded, then refused by the
    caller); nothing when the same answer by the same person was recorded already."""
    if question is None:
        raise NotFound(Code.UNKNOWN_QUESTION, "no question has that id ('docket inbox' lists them)")
    if question.kind != "ask" or question.status == "refused":
        raise Refused(Code.NOT_A_QUESTION, f"{question.key} is a {question.kind} request, not a question")
    if not trusted:
        return [next_event(ev.AnswerRefused, stream_of(question.key), question.version, now,
                           request_key=question.key, run_id=question.run_id, answered_by=by,
                           code="untrusted-answerer",
                           message=f"{by} is neither the local user nor named in [inbox] trusted")]
    if choice is not None:
        if not question.choices:
            raise BadInput(Code.NO_CHOICES, f"question {question.key} offers no choices; answer it with text")
        if not 1 <= choice <= len(question.choices):
            raise BadInput(Code.NO_SUCH_CHOICE, f"question {question.key} offers choices 1 to {len(question.choices)}")
        chosen = question.choices[choice - 1]
        if text is not None and text != chosen:
            raise BadInput(Code.ANSWER_AND_CHOICE, "give the answer's text or a choice, not both")
        text = chosen
    if text is None or not text.strip() or len(text) > MAX_TEXT or "\x00" in text:
        raise BadInput(Code.BAD_ANSWER, f"an answer is text of 1 to {MAX_TEXT} characters")
    if question.status == "answered":
        if (question.answer, question.answered_by) == (text, by):
            return []
        raise Refused(Code.ALREADY_ANSWERED, f"question {question.key} was answered by {question.answered_by}")
    if question.status == "expired":
        raise Refused(Code.QUESTION_EXPIRED, f"question {question.key} expired at its deadline {question.deadline_at}")
    require_open(run)
    return [next_event(ev.QuestionAnswered, stream_of(question.key), question.version, now, request_key=question.key,
                       run_id=question.run_id, task_id=question.task_id, worker_id=question.worker_id,
                       generation=question.generation, answer=text, choice=choice, answered_by=by, via=via)]


def decide_follow_up(proposal: Request, run: Run, *, accept: bool, by: str, trusted: bool,
                     via: Literal["cli", "web"], now: str) -> list[ev.Event]:
    """A person's decision on a queued proposal: FollowUpDecided (with RunTaskAdded and TaskPlanned when accepted),
    once; AnswerRefused when who decides is not trusted; nothing when the same decision was recorded already."""

    stream = stream_of(proposal.key)
    if not trusted:
        return [next_event(ev.AnswerRefused, stream, proposal.version, now, request_key=proposal.key,
                           run_id=proposal.run_id, answered_by=by, code="untrusted-answerer",
                           message=f"{by} is neither the local user nor named in [inbox] trusted")]
    wanted = "accepted" if accept else "refused"
    if proposal.decision != "queued":
        if proposal.decision == wanted and proposal.decided_by == by:
            return []
        raise Refused(Code.ALREADY_DECIDED, f"the follow-up {proposal.key} was {proposal.decision} by "
                                         f"{proposal.decided_by or 'the run policy'}")
    require_open(run)
    task_id, added = (None, []) if not accept else follow_ups.added_task(
        run, proposal.key, proposal.task_id, proposal.title or "", proposal.prompt or "", proposal.depends_on, now,
        proposal_sha256=proposal.content_sha256)
    return [next_event(ev.FollowUpDecided, stream, proposal.version, now, request_key=proposal.key,
                       run_id=proposal.run_id, decision=wanted, decided_by=by, via=via, task_id=task_id,
                       message=None), *added]


def deliver(question: Request | None, now: str) -> list[ev.Event]:
    """AnswerDelivered once the agent was sent the question's answer; nothing before it is answered, or after it
    was delivered once."""
    if question is None or question.kind != "ask" or question.status != "answered" or question.delivered:
        return []
    return [next_event(ev.AnswerDelivered, stream_of(question.key), question.version, now, request_key=question.key,
                       run_id=question.run_id, worker_id=question.worker_id, generation=question.generation)]


def expire(question: Request, run: Run, now: str) -> list[ev.Event]:
    """What an open question's passed deadline records: its default answer, or its expiry; nothing before its
    deadline, for a question that waits, or one already settled."""
    if (question.kind != "ask" or question.status != "open" or question.deadline_at is None
            or question.on_deadline == "wait" or to_ms(now) < to_ms(question.deadline_at)
            or run.status not in ("active", "paused")):
        return []
    stream = stream_of(question.key)
    common = dict(request_key=question.key, run_id=question.run_id, task_id=question.task_id,
                  worker_id=question.worker_id, generation=question.generation)
    if question.on_deadline == "default" and question.default_answer is not None:
        choice = question.choices.index(question.default_answer) + 1 \
            if question.default_answer in question.choices else None
        return [next_event(ev.QuestionAnswered, stream, question.version, now, **common,
                           answer=question.default_answer, choice=choice, answered_by=DEADLINE_ANSWERER,
                           via="deadline")]
    return [next_event(ev.QuestionExpired, stream, question.version, now, **common,
                       deadline_at=question.deadline_at)]
