"""The stream each aggregate's events live on: the one place stream names are spelled.

Pure and light (nothing but strings), so read models on `docket status`'s path,
which must not import pydantic, can name streams too. Each aggregate exposes its
own as ``stream_of``.
"""

from __future__ import annotations

__all__ = [
    "CANDIDATE_PREFIX",
    "candidate_stream",
    "HOOKS_PREFIX",
    "hooks_stream",
    "INTEGRATION_PREFIX",
    "integration_stream",
    "LEASE_PREFIX",
    "LEDGER_STREAM",
    "REQUEST_PREFIX",
    "RUN_PREFIX",
    "TASK_PREFIX",
    "WORKER_PREFIX",
    "lease_stream",
    "request_stream",
    "run_of_stream",
    "run_stream",
    "task_stream",
    "worker_stream",
]

LEDGER_STREAM = "ledger"
RUN_PREFIX = "run:"
TASK_PREFIX = "task:"
WORKER_PREFIX = "worker:"
LEASE_PREFIX = "lease:"
CANDIDATE_PREFIX = "candidate:"
INTEGRATION_PREFIX = "integration:"
HOOKS_PREFIX = "hooks:"
REQUEST_PREFIX = "request:"


def run_stream(run_id: str) -> str:
    return RUN_PREFIX + run_id


def task_stream(task_id: str) -> str:
    return TASK_PREFIX + task_id


def worker_stream(worker_id: str) -> str:
    return WORKER_PREFIX + worker_id


def lease_stream(resource: str) -> str:
    return LEASE_PREFIX + resource


def candidate_stream(binding_id: str) -> str:
    return CANDIDATE_PREFIX + binding_id


def integration_stream(run_id: str) -> str:
    return INTEGRATION_PREFIX + run_id


def hooks_stream(run_id: str) -> str:
    return HOOKS_PREFIX + run_id


def request_stream(key: str) -> str:
    return REQUEST_PREFIX + key


def run_of_stream(stream: str) -> str | None:
    """The run whose stream this is; None for any other stream."""
    return stream[len(RUN_PREFIX):] if stream.startswith(RUN_PREFIX) else None
