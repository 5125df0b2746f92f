"""Events of a worker's requests (stream ``request:<key>``): what an agent asked docket, and the answers.

One stream per request: the key is derived from the worker, its generation and the request id the agent chose
(``domain.requests.request_key``), so the same request always lands on the same stream and is decided once. The
stream starts with what was asked (QuestionAsked, ProgressReported, FollowUpProposed, WorkFinished) or with its
refusal (RequestRefused); a question is then answered once (QuestionAnswered), and every refused attempt at
it is kept (RequestRefused for a reused id with other content, AnswerRefused for an answer from someone untrusted).
A follow-up the run's policy queued is decided once by a person (FollowUpDecided).
"""


from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from ..kernel.values import MAX_SAFE_INT
from .base import Code, Event, Generation, Id, Sha256, Text, Timestamp

__all__ = [
    "AnswerDelivered",
    "AnswerRefused",
    "FollowUpDecided",
    "ProgressReported",
    "QuestionAnswered",
    "QuestionAsked",
    "QuestionExpired",
    "RequestRefused",
    "FollowUpProposed",
    "WorkFinished",
]

RequestKey = Annotated[str, StringConstraints(pattern=r"^req-[a-z2-7]{16}$")]
Choice = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]
Identity = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
Count = Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
Kind = Literal["ask", "progress", "propose", "finish"]


class _Request(Event):
    """Who asked, bound by docket (never by what the agent sent): the run, task, worker and generation of the
    channel it came through; the agent's own request id, and the digest of what it asked (canonical JSON)."""

    request_key: RequestKey
    run_id: Id
    task_id: Id
    worker_id: Id
    generation: Generation
    request_id: Id
    content_sha256: Sha256


class QuestionAsked(_Request):
    """A worker asks a person: why (blocked: it cannot go on; choice: pick one of choices; approval: may it do
    something) and the question; and, by the run's [inbox] policy, its deadline (null: none) and what happens then:
    wait on, answer default_answer (the first choice, or the configured default), or fail the task."""

    name = "QuestionAsked"
    reason: Literal["blocked", "choice", "approval"]
    question: Text
    choices: Annotated[list[Choice], Field(max_length=20)]
    deadline_at: Timestamp | None
    on_deadline: Literal["wait", "default", "fail"]
    default_answer: Text | None


class QuestionAnswered(Event):
    """The question's one answer: its text (the choice's text when a choice was picked, choice counting from 1),
    who gave it (the local user, or an identity from [inbox] trusted; "docket" for a deadline's default), and
    through what (the command line, the web view, the deadline's policy)."""

    name = "QuestionAnswered"
    request_key: RequestKey
    run_id: Id
    task_id: Id
    worker_id: Id
    generation: Generation
    answer: Text
    choice: Annotated[int, Field(ge=1, le=20)] | None
    answered_by: Identity
    via: Literal["cli", "web", "deadline"]


class AnswerDelivered(Event):
    """The question's answer reached the agent that asked (its channel's reply was sent): a generation that ends
    after this is judged as any other; one that ends before goes on in the next generation, told the answer."""

    name = "AnswerDelivered"
    request_key: RequestKey
    run_id: Id
    worker_id: Id
    generation: Generation


class AnswerRefused(Event):
    """An answer was refused and nothing of it was taken: who tried (code untrusted: not the local user nor a
    trusted identity)."""

    name = "AnswerRefused"
    request_key: RequestKey
    run_id: Id
    answered_by: Identity
    code: Code
    message: Text


class QuestionExpired(Event):
    """The question's deadline passed unanswered and its policy is to fail: the task's generation is stopped
    and judged failed (a deadline whose policy is a default is answered instead, via "deadline")."""

    name = "QuestionExpired"
    request_key: RequestKey
    run_id: Id
    task_id: Id
    worker_id: Id
    generation: Generation
    deadline_at: Timestamp


class ProgressReported(_Request):
    """A worker says how far it got; the usage it reports is its generation's so far (cumulative; null: not
    reported), counted against the run's max_cost and max_tokens."""

    name = "ProgressReported"
    summary: Text
    input_tokens: Count | None
    output_tokens: Count | None
    cost_micro_usd: Count | None


class FollowUpProposed(_Request):
    """A worker proposes a follow-up task; decision is the run's policy ([inbox] proposals): accepted, queued for
    a person, or refused (message says why)."""

    name = "FollowUpProposed"
    title: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]
    prompt: Text
    depends_on: Annotated[list[Id], Field(max_length=100)]
    decision: Literal["accepted", "queued", "refused"]
    message: Text | None


class FollowUpDecided(Event):
    """A person decided a follow-up task the run's policy queued for them: accepted (task_id: the task it became,
    added to the run by RunTaskAdded) or refused; who decided (the local user, or an identity from [inbox]
    trusted) and through what."""

    name = "FollowUpDecided"
    request_key: RequestKey
    run_id: Id
    decision: Literal["accepted", "refused"]
    decided_by: Identity
    via: Literal["cli", "web"]
    task_id: Id | None
    message: Text | None


class WorkFinished(_Request):
    """A worker says its work is done, and sums it up. Its exit, not this, ends the generation; its checks, not
    this, judge the work."""

    name = "WorkFinished"
    summary: Text


class RequestRefused(_Request):
    """A request was refused and nothing of it was taken: its generation is fenced (stale-generation), its request
    id was used before with other content (request-id-conflict). A request that is not well formed is answered so,
    and not recorded."""

    name = "RequestRefused"
    kind: Kind
    code: Code
    message: Text
