"""Read model: intents still waiting for their outcome.

An event's role comes from its class (``effect_role``): an intent adds a row, an
outcome naming the same intent_id removes it, and an uncertain observation
("unknown") leaves it pending, counting the observations recorded and when the
effector looks again on its own.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "pending_intents"
COLUMNS = {"intent_id": str, "type": str, "stream": str, "run_id": str, "position": int,
           "requested_at": str, "unknown_count": int, "last_unknown_reason": str, "retry_at": str}
INDEXES = ("run_id",)
PK = "intent_id"


def _role(type_: str) -> str | None:
    """The stored type's role in the effect protocol; None for a fact or a type no class has (imports no class)."""
    from ..domain.events import role_of

    role = role_of(type_)
    return None if role == "fact" else role


def apply_any(c: sqlite3.Connection, position: int, stream: str, type_: str, at: str, p: dict[str, Any]) -> None:
    role = _role(type_)
    intent_id = p.get("intent_id")
    if role is None or intent_id is None:
        return
    if role == "intent":
        c.execute(
            "INSERT OR IGNORE INTO pending_intents (intent_id, type, stream, run_id, position, requested_at, "
            "unknown_count) VALUES (?, ?, ?, ?, ?, ?, 0)",
            (intent_id, type_, stream, p.get("run_id"), position, at),
        )
    elif role == "unknown":
        c.execute(
            "UPDATE pending_intents SET unknown_count = unknown_count + 1, last_unknown_reason = ?, retry_at = ? "
            "WHERE intent_id = ?",
            (p.get("reason"), p.get("retry_at"), intent_id),
        )
    else:
        c.execute("DELETE FROM pending_intents WHERE intent_id = ?", (intent_id,))


def pending(c: sqlite3.Connection, run_id: str | None = None) -> list[dict[str, Any]]:
    if run_id is None:
        return as_dicts(c.execute("SELECT * FROM pending_intents ORDER BY position"))
    return as_dicts(c.execute("SELECT * FROM pending_intents WHERE run_id = ? ORDER BY position", (run_id,)))
