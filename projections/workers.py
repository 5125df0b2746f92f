"""Read model: one row per worker, with its current generation and the life of that generation's process.

The first registration of an id wins. ``status`` follows the Worker aggregate:
registered, launching, running, exited, launch-failed, lost (its host stopped renewing: WorkerLost). ``sandbox``: "landlock" or "off" once its generation's
launch is asked for. ``egress_refused``: how many connections its egress proxy refused (EgressRefused), and
``egress_hosts`` the most refused (host:port (count)).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .query import as_dicts

TABLE = "workers"
COLUMNS = {"worker_id": str, "run_id": str, "role": str, "task_id": str, "generation": int,
           "registered_at": str, "relaunched_at": str, "position": int,
           "status": str, "host": str, "pid": int, "pgid": int, "launched_at": str, "log_path": str,
           "worktree": str, "ended_at": str, "exit_cause": str, "exit_code": int, "exit_signal": int,
           "tail_line": str, "session_id": str, "input_tokens": int, "output_tokens": int, "cost_micro_usd": int,
           "agent_turns": int, "agent_error": int, "sandbox": str, "egress_refused": int, "egress_hosts": str}
INDEXES = ("run_id",)
PK = "worker_id"

_FRESH_GENERATION = ("status = 'registered', host = NULL, pid = NULL, pgid = NULL, launched_at = NULL, "
                     "log_path = NULL, ended_at = NULL, exit_cause = NULL, exit_code = NULL, exit_signal = NULL, "
                     "tail_line = NULL, session_id = NULL, input_tokens = NULL, output_tokens = NULL, "
                     "cost_micro_usd = NULL, agent_turns = NULL, agent_error = NULL, sandbox = NULL, egress_refused = NULL, "
                     "egress_hosts = NULL")


def _registered(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(
        "INSERT OR IGNORE INTO workers (worker_id, run_id, role, task_id, generation, registered_at, position, status) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'registered')",
        (p["worker_id"], p["run_id"], p["role"], p["task_id"], p["generation"], at, position),
    )


def _relaunched(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute(f"UPDATE workers SET generation = ?, relaunched_at = ?, position = ?, {_FRESH_GENERATION} "
              "WHERE worker_id = ?", (p["generation"], at, position, p["worker_id"]))


def _same_generation(p: dict[str, Any]) -> tuple[str, int]:
    return p["worker_id"], p["generation"]


def _launch_requested(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    sandbox = "landlock" if (p.get("sandbox") or {}).get("enforced") else "off"  # none recorded: none enforced
    c.execute("UPDATE workers SET status = 'launching', log_path = ?, worktree = ?, sandbox = ? "
              "WHERE worker_id = ? AND generation = ?", (p["log_path"], p["worktree"], sandbox, *_same_generation(p)))


def _launched(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    proc = p["process"]
    c.execute("UPDATE workers SET status = 'running', host = ?, pid = ?, pgid = ?, launched_at = ? "
              "WHERE worker_id = ? AND generation = ?",
              (proc["host"], proc["pid"], proc["pgid"], at, *_same_generation(p)))


def _launch_failed(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE workers SET status = 'launch-failed', exit_cause = ?, ended_at = ? "
              "WHERE worker_id = ? AND generation = ?", (p["code"], at, *_same_generation(p)))


def _exited(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    lines = [line for line in p["tail"].splitlines() if line.strip()]
    c.execute("UPDATE workers SET status = 'exited', exit_cause = ?, exit_code = ?, exit_signal = ?, ended_at = ?, "
              "tail_line = ? WHERE worker_id = ? AND generation = ? AND status != 'exited'",
              (p["cause"], p["exit_code"], p["signal"], at, lines[-1][:200] if lines else None,
               *_same_generation(p)))


def _lost(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE workers SET status = 'lost', ended_at = COALESCE(ended_at, ?) "
              "WHERE worker_id = ? AND generation = ?", (at, *_same_generation(p)))


def _reported(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    c.execute("UPDATE workers SET session_id = ?, input_tokens = ?, output_tokens = ?, cost_micro_usd = ?, "
              "agent_turns = ?, agent_error = ? WHERE worker_id = ? AND generation = ?",
              (p["session_id"], p["input_tokens"], p["output_tokens"], p["cost_micro_usd"], p["turns"],
               None if p["is_error"] is None else int(p["is_error"]), p["worker_id"], p["generation"]))


def _egress_refused(c: sqlite3.Connection, position: int, at: str, p: dict[str, Any]) -> None:
    hosts = ", ".join(f"{r['host']}:{r['port']} ({r['count']})" for r in p["refused"][:5])
    more = len(p["refused"]) - 5
    c.execute("UPDATE workers SET egress_refused = ?, egress_hosts = ? WHERE worker_id = ? AND generation = ?",
              (p["total"], hosts + (f" and {more} more" if more > 0 else ""), p["worker_id"], p["generation"]))


def handlers() -> dict[str, Any]:
    from ..domain import events as ev  # the write path only: status on current views never imports pydantic

    return {ev.stored.WorkerRegistered: _registered, ev.stored.WorkerRelaunched: _relaunched,
            ev.stored.WorkerLaunchRequested: _launch_requested, ev.stored.WorkerLaunched: _launched,
            ev.stored.WorkerLaunchFailed: _launch_failed, ev.stored.WorkerExited: _exited,
            ev.stored.WorkerLost: _lost, ev.stored.AgentReported: _reported,
            ev.stored.EgressRefused: _egress_refused}


def workers_of(c: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return as_dicts(c.execute("SELECT * FROM workers WHERE run_id = ? ORDER BY position", (run_id,)))


def active_workers(c: sqlite3.Connection) -> list[dict[str, Any]]:
    """Workers whose current generation is launching or running, as the views know them."""
    return as_dicts(c.execute("SELECT * FROM workers WHERE status IN ('launching', 'running') ORDER BY position"))


def named(c: sqlite3.Connection, name: str) -> list[str]:
    """Worker ids the name can mean: the id itself, else every ``<run>.<name>`` (a task's worker under go)."""
    exact = [r[0] for r in c.execute("SELECT worker_id FROM workers WHERE worker_id = ?", (name,))]
    return exact or [r[0] for r in c.execute("SELECT worker_id FROM workers WHERE worker_id = run_id || '.' || ? "
                                             "ORDER BY position", (name,))]
