"""docs/events.md, rendered from the event catalogue itself so it cannot go stale."""

from __future__ import annotations

import inspect
from typing import Any

INTRO = """# Events

Every transition docket records is one of these events. This page is generated
by `docket schema --markdown` (`make docs`); a test fails when it is stale.

Each event is stored as one row of the ledger: its **stream** (the aggregate it
belongs to, e.g. `run:<id>`, `lease:<resource>`), its **version** within that
stream (1, 2, 3 ... with no gaps; a second writer of the same version is
refused), its **type** (`<Name>.v<N>`, fixed forever) and its **state**, the
canonical JSON of `{"payload": {...}, "recorded_at": "<UTC time>"}`. Canonical
JSON is UTF-8 with object keys sorted by code point, no insignificant
whitespace and no floats; durations are integer milliseconds, times are UTC
ISO-8601 strings with milliseconds (`2026-01-01T00:00:00.000Z`).

The ledger position `n` of an event is its place in the one global order. The
hash chain covers every event:

    entry(n)  = canonical_json({"position": n, "state_sha256": sha256_hex(state),
                                "stream": stream, "type": type, "version": version})
    digest(n) = sha256(digest(n-1) || entry(n))        (digest as 32 raw bytes)

with `digest(0)` the genesis digest that `LedgerCreated` at position 1 records.
Hashing the exact stored state bytes (instead of re-encoding the payload) means
that any change to a stored byte is caught and that verification needs no JSON
decoding; because the state is canonical JSON, an auditor who holds the decoded
event re-encodes it to the same bytes.

Each event has a role in the effect protocol (shown under its name). Intents
(names ending in `Requested`) ask for an effect on the world; an outcome
carries the same `intent_id` and resolves it (`IntentCancelled` is the outcome
recorded when a run is aborted before its intent was carried out). What is
pending follows from the chained events alone: an intent with no outcome.
`IntentOutcomeUnknown` records an observation that could not decide; the intent
stays pending and is observed again, never redone blindly. Version 2 counts the
observations in a row with the same reason and names the time before which no
effector looks again on its own (1 s, doubling, at most an hour): a stuck
intent is recorded again only when its reason changes or its back-off has run
out. Version 1 events of older ledgers still decode.

`LedgerCreated` v2 binds the ledger to the repository it was made in: the
identity docket keeps in `<git common dir>/docket/repository-id`, and where
that repository was. A ledger is not used to record or drive effects in
another repository (`foreign-ledger`); it can still be verified and read
anywhere. Recorded times never go backwards: each event's time is clamped to
its predecessor's inside the append transaction, and `docket verify` reports a
time that does.
"""


def _type_of(spec: dict[str, Any]) -> str:
    if "anyOf" in spec:
        return " or ".join(_type_of(s) for s in spec["anyOf"])
    if "const" in spec:
        return f"`{spec['const']!r}`".replace("'", '"')
    if "enum" in spec:
        return " or ".join(f'`"{v}"`' for v in spec["enum"])
    text = spec.get("type", "any")
    limits = []
    for key, label in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("minLength", "length ≥"),
                       ("maxLength", "length ≤")):
        if key in spec:
            limits.append(f"{label} {spec[key]}")
    if "pattern" in spec:
        limits.append(f"pattern `{spec['pattern']}`")
    return text + (f" ({', '.join(limits)})" if limits else "")


def render() -> str:
    from ...domain.events import EVENT_TYPES, Event
    from ...projections import intents
    from ...projections.views import READ_MODELS

    envelope = set(Event.model_fields)
    parts = [INTRO]
    for type_name, cls in EVENT_TYPES.items():
        schema = cls.model_json_schema()
        doc = inspect.cleandoc(cls.__doc__ or "")
        tables = [m.TABLE for m in READ_MODELS if hasattr(m, "handlers") and type_name in m.handlers()]
        if cls.effect_role != "fact":
            tables.append(intents.TABLE)
        projected = f"\n\nRead models: {', '.join(f'`{t}`' for t in tables)}." if tables else ""
        role = f"Role: {cls.effect_role}.\n\n" if cls.effect_role != "fact" else ""
        parts.append(f"## {type_name}\n\n{role}{doc}{projected}\n\n| field | type |\n|---|---|")
        for field, spec in schema["properties"].items():
            if field not in envelope:
                parts.append(f"| `{field}` | {_type_of(spec).replace('|', chr(92) + '|')} |")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"
