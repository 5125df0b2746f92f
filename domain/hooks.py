"""Hooks: which events a configured command fires for, the run's record of hooks asked for, and their outcome. Pure.

A selector in ``[hooks]`` is an alias (``task-finished``, ``check-failed``,
``run-finished``, ``needs-attention``, ``question-asked``) or an event type name (``TaskFinished``
for every version, ``TaskFinished.v1`` for one). Each (hook, position) is asked
for once per run: the request is decided inside the ledger's write transaction,
so two docket processes firing at once ask once.

Once across crashes: before it starts the command, the process running a hook
claims it with a create-only marker file that names that process. What is
observed then decides the outcome: no marker, run it; a result written, record
it; a marker whose process is alive, wait; a marker whose process is dead and no
result, the hook is interrupted and never run again. That leaves one window: a
docket killed after its command started and before the result was written
records "interrupted" for a command that may have run (its output is in the log).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from . import events as ev
from .aggregate import next_event
from .containment.sandbox import SandboxRecord
from .kernel.streams import hooks_stream as stream_of
from .effects import Act, Unknown

__all__ = ["ALIASES", "HookCommand", "HookObservation", "HookRequest", "Hooks", "apply", "check_selector", "decide", "matches",
           "request", "stream_of", "types_of"]


def _names(*classes: type[ev.Event]) -> tuple[str, ...]:
    return tuple(cls.type_name() for cls in classes)


ALIASES: dict[str, tuple[str, ...]] = {
    "task-finished": _names(ev.TaskFinished),
    "check-failed": _names(ev.CheckFailed, ev.CheckTimedOut),
    "run-finished": _names(ev.RunCompleted, ev.RunAborted, ev.RunBudgetExhausted, ev.RunUsageExhausted),
    # TaskFinished only when it failed (see matches); an unknown of any of the run's intents but a hook's own
    "needs-attention": _names(ev.TaskFinished, ev.IntegrationStepConflicted, ev.IntegrationStepRejected,
                              ev.IntegrationStepFailed, ev.IntegrationTargetMoved, ev.RunBudgetExhausted,
                              ev.RunUsageExhausted, ev.RunWaiting, ev.IntentOutcomeUnknown, ev.IntentOutcomeUnknownV2,
                              ev.QuestionAsked, ev.FollowUpProposed),
    # an agent waits for a person (docket inbox): a question, or a follow-up task queued for a decision
    "question-asked": _names(ev.QuestionAsked, ev.FollowUpProposed),
}
_PERSON_NEEDED = frozenset(_names(ev.FollowUpProposed))  # only when its policy queued it for a person
_OWN = frozenset(_names(ev.HookRequested, ev.HookFinished))  # a hook firing for hooks would never end


def types_of(selector: str) -> tuple[str, ...]:
    """The event type names a selector can fire for; ValueError naming the aliases for an unknown one."""
    if selector in ALIASES:
        return ALIASES[selector]
    named = tuple(name for name in ev.EVENT_TYPES if selector in (name, name.rsplit(".v", 1)[0]))
    if named and not set(named) & _OWN:
        return named
    if set(named) & _OWN:
        raise ValueError(f"{selector!r} is a hook's own event; a hook cannot fire for hooks")
    aliases = ", ".join(ALIASES)
    raise ValueError(f"unknown hook event {selector!r}: name one of {aliases}, or an event type such as "
                     "TaskFinished or TaskFinished.v1 (docs/events.md lists them)")


def check_selector(selector: str) -> str:
    types_of(selector)
    return selector


def matches(selector: str, type_name: str, payload: Mapping[str, Any]) -> bool:
    """Whether a hook with this selector fires for an event of the run (hooks' own stream never reaches here)."""
    if type_name not in types_of(selector):
        return False
    if selector == "needs-attention" and type_name in ALIASES["task-finished"]:
        return payload.get("result") == "failed"
    if selector in ("needs-attention", "question-asked") and type_name in _PERSON_NEEDED:
        return payload.get("decision") == "queued"
    return True


# --- the aggregate: one stream per run ------------------------------------------------------------------------------

@dataclass(frozen=True)
class HookRequest:
    intent_id: str
    hook: str
    position: int
    result: str | None = None  # None while pending


@dataclass(frozen=True)
class Hooks:
    run_id: str
    version: int
    requests: tuple[HookRequest, ...] = ()

    def requested(self, hook: str, position: int) -> bool:
        return any(r.hook == hook and r.position == position for r in self.requests)


def apply(hooks: Hooks | None, event: ev.Event, position: int) -> Hooks:
    if hooks is None:
        assert isinstance(event, ev.HookRequested), event.type_name()
        hooks = Hooks(event.run_id, 0)
    hooks = replace(hooks, version=event.version)
    if isinstance(event, ev.HookRequested):
        return replace(hooks, requests=(*hooks.requests, HookRequest(event.intent_id, event.hook, event.position)))
    if isinstance(event, ev.HookFinished):
        return replace(hooks, requests=tuple(replace(r, result=event.result) if r.intent_id == event.intent_id else r
                                             for r in hooks.requests))
    if event.effect_role == "unknown":
        return hooks
    raise TypeError(f"Hooks cannot apply {event.type_name()}")


@dataclass(frozen=True)
class HookCommand:
    """What one configured hook runs (from [hooks] of docket.toml)."""

    argv: Sequence[str]
    timeout_ms: int
    env_allow: Sequence[str] = ()
    sandbox: str = "landlock"  # docket.toml's sandbox, and the hook's extras and network (see domain/containment/sandbox.py)
    read: Sequence[str] = ()
    write: Sequence[str] = ()
    network: str | tuple[int, ...] = "any"


def request(hooks: Hooks | None, run_id: str, fired: Sequence[tuple[str, int, str]],
            commands: Mapping[str, HookCommand], new_intent_id: Callable[[], str], now: str, *, repository: str,
            ledger: str, directory: str, base: str | None = None) -> list[ev.HookRequested]:
    """One intent for each (hook, position, event type) fired that the run has not asked for yet, in that order."""
    version = hooks.version if hooks else 0
    seen = {(r.hook, r.position) for r in hooks.requests} if hooks else set()
    made = []
    for hook, position, event_type in fired:
        if (hook, position) in seen:
            continue
        seen.add((hook, position))
        command = commands[hook]
        made.append(next_event(ev.HookRequested, stream_of(run_id), version, now, intent_id=new_intent_id(),
                               run_id=run_id, hook=hook, position=position, event_type=event_type,
                               argv=list(command.argv), timeout_ms=command.timeout_ms,
                               env_allow=list(command.env_allow), repository=repository, ledger=ledger,
                               directory=directory, sandbox=command.sandbox, read=list(command.read),
                               write=list(command.write), network=command.network if isinstance(command.network, str)
                               else list(command.network), base=base))
        version += 1
    return made


# --- deciding the outcome ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HookObservation:
    """What the hook's files and the processes they name say.

    absent: no marker: the hook was never claimed. running: the claiming docket
    process is alive. orphaned: that process is dead, but the command's process
    group still runs (stop it). ended: the claiming process is dead, nothing of
    the command runs, and no result was written. finished: the result is written.
    unknown: nothing can be told (another host, an unreadable folder).
    """

    state: Literal["absent", "running", "orphaned", "ended", "finished", "unknown"]
    detail: str = ""
    started: bool = False  # the command's process was started (its gate may have opened)
    result: str | None = None  # finished: succeeded | failed | timed-out | not-started
    exit_code: int | None = None
    signal: int | None = None
    duration_ms: int | None = None
    output_sha256: str | None = None
    output_bytes: int | None = None
    tail: str = ""
    sandbox: dict[str, Any] | None = None  # finished: the record of the sandbox its command ran in


def decide(hooks: Hooks, intent: ev.HookRequested, observed: HookObservation, now: str) -> Any:
    """HookFinished, Unknown, or Act (run the command; or stop an orphaned group)."""

    if observed.state in ("absent", "orphaned"):
        return Act()
    if observed.state in ("running", "unknown"):
        return Unknown(observed.detail or f"hook {intent.intent_id} cannot be observed")
    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, hook=intent.hook, position=intent.position,
                  output_sha256=observed.output_sha256, output_bytes=observed.output_bytes, tail=observed.tail[-4000:])
    if observed.state == "ended":
        message = ("the docket process running this hook died after its command started; it may have run (see its "
                   "log) and is not run again" if observed.started else
                   "the docket process running this hook died after claiming it, before its command started; it did "
                   "not run and is not run again")
        return next_event(ev.HookFinished, stream_of(intent.run_id), hooks.version, now, **common,
                          result="interrupted", exit_code=None, signal=None, duration_ms=None, message=message)
    assert observed.result is not None
    return next_event(ev.HookFinished, stream_of(intent.run_id), hooks.version, now, **common,
                      result=observed.result, exit_code=observed.exit_code, signal=observed.signal,
                      duration_ms=observed.duration_ms, message=(observed.detail or None) and observed.detail[:4000],
                      sandbox=SandboxRecord.model_validate(observed.sandbox) if observed.sandbox else None)
