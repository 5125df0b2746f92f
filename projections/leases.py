"""Read model: one row per leased resource, with its current (or last) lease."""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "leases"
COLUMNS = {"resource": str, "run_id": str, "worker_id": str, "generation": int, "token": int,
           "status": str, "granted_at": str, "expires_at": str, "ended_at": str, "position": int}
INDEXES = ("run_id",)
PK = "resource"


def _granted(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(
        "INSERT OR REPLACE INTO leases (resource, run_id, worker_id, generation, token, status, granted_at, "
        "expires_at, ended_at, position) VALUES (?, ?, ?, ?, ?, 'held', ?, ?, NULL, ?)",
        (p["resource"], p["run_id"], p["worker_id"], p["generation"], position, at, p["expires_at"], position),
    )


def _renewed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE leases SET expires_at = ?, position = ? WHERE resource = ?",
              (p["expires_at"], position, p["resource"]))


def _ended(status: str):  # noqa: ANN202
    def handler(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
        c.execute("UPDATE leases SET status = ?, ended_at = ?, position = ? WHERE resource = ?",
                  (status, at, position, p["resource"]))
    return handler


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {
        ev.stored.LeaseGranted: _granted,
        ev.stored.LeaseRenewed: _renewed,
        ev.stored.LeaseReleased: _ended("released"),
        ev.stored.LeaseExpired: _ended("expired"),
    }


def leases_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM leases WHERE run_id = ? ORDER BY token", (run_id,)))
