"""Use case: fire a run's hooks ([hooks] in docket.toml) for its new events, each once, and drive them to their end.

``docket go`` calls ``fire_hooks`` about once a second and once at the end,
passing back the position it examined last. Each call reads only the run's
events of the types its hooks can fire for, asks (in one write transaction)
for every (hook, position) the run has not asked for yet, then drives the run's
pending hook intents through the effector: the hook kind (adapters/service_layer/kernel/intents.py)
claims a hook with a create-only marker before its command starts, so a
command runs at most once even across crashes and racing processes, and
``docket replay --apply`` finishes a hook left pending. A hook's failure is
recorded (HookFinished) and never raised: the run goes on.

A hook's command runs to its end (or its timeout) inside the call: keep hooks quick.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ....domain import hooks as hooks_aggregate
from ....domain.kernel import streams
from ....domain.config import HookConfig
from ....domain.events import Event, HookFinished, HookRequested
from ...world import faults
from ...world.clock import Clock, new_id
from ..kernel.ledger import Ledger

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["Fired", "fire_hooks"]

BATCH = 2000


@dataclass(frozen=True)
class Fired:
    examined: int  # the highest ledger position examined: pass it back as ``after`` next time
    requested: tuple[HookRequested, ...]  # hooks asked for by this call
    outcomes: tuple[HookFinished, ...]  # hooks this call saw to their end, in ledger order


def fire_hooks(ledger: Ledger, clock: Clock, effector: EffectorPort, hooks: Mapping[str, HookConfig], run_id: str, *,
               docket_dir: Path, ledger_path: Path, repository: Path, after: int = 0,
               sandbox: str = "landlock") -> Fired:
    """Ask for the hooks the run's events after ``after`` fire, then drive every pending hook of the run."""
    examined = ledger.head()
    fired = list(_fired(ledger, hooks, run_id, after, examined)) if hooks and examined > after else []
    requested: list[HookRequested] = []
    if fired:
        commands = {name: hooks_aggregate.HookCommand(tuple(hook.command), hook.timeout_ms, tuple(hook.env_allow),
                                                      sandbox, tuple(hook.read), tuple(hook.write),
                                                      # ports or a word: _ports_only (domain/config.py) refused hosts
                                                      cast("str | tuple[int, ...]", hook.network))
                    for name, hook in hooks.items()}

        def decision(now: str) -> list[Event]:
            made = hooks_aggregate.request(
                ledger.get(hooks_aggregate.apply, hooks_aggregate.stream_of(run_id)), run_id, fired, commands,
                lambda: new_id("hook"), now, repository=str(repository.absolute()),
                ledger=str(ledger_path.absolute()), directory=str((docket_dir / "hooks").absolute()),
                base=_run_base(ledger, run_id))
            requested.extend(made)
            return list(made)

        ledger.decide(decision, clock.now())
        if requested:
            faults.crash_point("hook:after-request")
    pending = [p.intent.intent_id for p in ledger.pending_intents()
               if isinstance(p.intent, HookRequested) and p.intent.run_id == run_id]
    outcomes: list[HookFinished] = []
    if pending:
        for result in effector.run_pending(only=set(pending)):
            if isinstance(result.event, HookFinished):
                outcomes.append(result.event)
    return Fired(examined, tuple(requested), tuple(outcomes))


def _run_base(ledger: Ledger, run_id: str) -> str | None:
    """The run's base commit: the files of the repository a hook names are run as it holds them."""
    from ....domain import run as run_aggregate

    run = ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id))
    return run.base_commit if run is not None else None


def _fired(ledger: Ledger, hooks: Mapping[str, HookConfig], run_id: str, after: int,
           until: int) -> Iterator[tuple[str, int, str]]:
    """(hook, position, event type) for each event of the run in (after, until] that a hook fires for."""
    topics = sorted({name for selector in hooks for name in hooks_aggregate.types_of(selector)})
    runs_of_streams: dict[str, str | None] = {}
    for position, stream, type_name, payload in _events(ledger, after, until, topics):
        if stream.startswith(streams.HOOKS_PREFIX):
            continue  # a hook's own unknowns fire nothing
        if _run_of(ledger, stream, payload, runs_of_streams) != run_id:
            continue
        for selector in hooks:
            if hooks_aggregate.matches(selector, type_name, payload):
                yield selector, position, type_name


def _events(ledger: Ledger, after: int, until: int,
            topics: list[str]) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    """(position, stream, type, payload) of the events of those types in (after, until], by the topic index."""
    start = after + 1
    while start <= until:
        batch = ledger.recorder.select_notifications(start=start, limit=BATCH, stop=until, topics=topics)
        for n in batch:
            yield n.id, str(n.originator_id), n.topic, json.loads(n.state)["payload"]
        if len(batch) < BATCH:
            return
        start = batch[-1].id + 1


def _run_of(ledger: Ledger, stream: str, payload: Mapping[str, Any], known: dict[str, str | None]) -> str | None:
    """The run an event belongs to: its run_id, or else (an unknown names only its intent) its stream's run."""
    run_id = payload.get("run_id")
    if isinstance(run_id, str):
        return run_id
    if stream not in known:
        first = ledger.history(stream, until_version=1)
        known[stream] = getattr(first[0][1], "run_id", None) if first else None
    return known[stream]
