"""Shared by the read models' query functions."""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["ViewsConnection", "as_dicts"]

ViewsConnection = sqlite3.Connection  # what the query functions read: a connection to the views database


def as_dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """Every row of an executed query as a dict keyed by column name."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]
