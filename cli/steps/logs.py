"""docket worker logs: a worker's output, with control characters escaped (nothing it printed drives the terminal)."""

from __future__ import annotations

import codecs
import os
import sys
import time

from ...domain.kernel.errors import NotFound
from ..console.context import Context
from ..console.output import shown
from ...domain.kernel.codes import Code

__all__ = ["print_log"]

CHUNK = 1 << 16


def print_log(ctx: Context, worker_id: str, generation: int | None, *, follow: bool) -> int:
    from ...adapters.service_layer.use_cases.worker_generations import load_worker

    worker = load_worker(ctx.ledger, worker_id)
    generation = worker.generation if generation is None else generation
    path = ctx.paths.ledger.parent / "logs" / worker_id / f"{generation}.log"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise NotFound(Code.LOG_NOT_FOUND, f"worker {worker_id} generation {generation} has no log at {path}") from None
    if ctx.json:
        os.close(fd)
        if follow:
            from ...domain.kernel.errors import BadInput

            raise BadInput(Code.JSON_AND_FOLLOW, "--json prints one document: the log's digest and tail; "
                                              "follow the log without --json")
        from ...adapters.world.files.logs import log_summary
        from ..console.output import emit

        summary = log_summary(path)
        emit(True, {"worker_id": worker_id, "generation": generation, "log_path": str(path),
                    "sha256": summary.sha256, "bytes": summary.size, "tail": summary.tail}, None)
        return 0
    out = sys.stdout
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character split between reads stays whole
    with os.fdopen(fd, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if chunk:
                text = decoder.decode(chunk)
                out.write("\n".join(shown(line) for line in text.split("\n")))
                out.flush()
                continue
            if not follow or not _still_running(ctx, worker_id, generation):
                break
            time.sleep(0.3)
    return 0


def _still_running(ctx: Context, worker_id: str, generation: int) -> bool:
    from ...adapters.service_layer.use_cases.worker_generations import load_worker

    worker = load_worker(ctx.ledger, worker_id)
    return worker.generation == generation and worker.status in ("launching", "running")
