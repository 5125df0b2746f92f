"""Read model: intents still waiting for their outcome.

An event whose type ends in 'Requested' is an intent; any later event naming the
same intent_id is its outcome, except IntentOutcomeUnknown, which leaves it
pending and counts the uncertain observation.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "pending_intents"
COLUMNS = {"intent_id": str, "type": str, "stream": str, "run_id": str, "position": int,
           "requested_at": str, "unknown_count": int, "last_unknown_reason": str}
INDEXES = ("run_id",)
PK = "intent_id"


def apply_any(c: sqlite3.Connection, position: int, stream: str, type_: str, at: str, p: dict[str, Any]) -> None:
    intent_id = p.get("intent_id")
    if intent_id is None:
        return
    if type_.split(".v")[0].endswith("Requested"):
        c.execute(
            "INSERT INTO pending_intents (intent_id, type, stream, run_id, position, requested_at, unknown_count) "
            "VALUES (?, ?, ?, ?, ?, ?, 0)",
            (intent_id, type_, stream, p.get("run_id"), position, at),
        )
    elif type_ == "IntentOutcomeUnknown.v1":
        c.execute(
            "UPDATE pending_intents SET unknown_count = unknown_count + 1, last_unknown_reason = ? "
            "WHERE intent_id = ?",
            (p["reason"], intent_id),
        )
    else:
        c.execute("DELETE FROM pending_intents WHERE intent_id = ?", (intent_id,))


def pending(c: sqlite3.Connection, run_id: str | None = None) -> list[dict[str, Any]]:
    if run_id is None:
        return as_dicts(c.execute("SELECT * FROM pending_intents ORDER BY position"))
    return as_dicts(c.execute("SELECT * FROM pending_intents WHERE run_id = ? ORDER BY position", (run_id,)))
