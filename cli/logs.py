"""docket worker logs: a worker's output, with control characters escaped (nothing it printed drives the terminal)."""

from __future__ import annotations

import os
import sys
import time

from ..domain.errors import NotFound
from .context import Context
from .output import shown

__all__ = ["print_log"]

CHUNK = 1 << 16


def print_log(ctx: Context, worker_id: str, generation: int | None, *, follow: bool) -> int:
    from ..adapters.app.services import load_worker

    worker = load_worker(ctx.ledger, worker_id)
    generation = generation or worker.generation
    path = ctx.paths.ledger.parent / "logs" / worker_id / f"{generation}.log"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise NotFound("log-not-found", f"worker {worker_id} generation {generation} has no log at {path}") from None
    out = sys.stdout
    with os.fdopen(fd, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if chunk:
                text = chunk.decode("utf-8", errors="replace")
                out.write("\n".join(shown(line) for line in text.split("\n")))
                out.flush()
                continue
            if not follow or not _still_running(ctx, worker_id, generation):
                break
            time.sleep(0.3)
    return 0


def _still_running(ctx: Context, worker_id: str, generation: int) -> bool:
    from ..adapters.app.services import load_worker

    worker = load_worker(ctx.ledger, worker_id)
    return worker.generation == generation and worker.status in ("launching", "running")
