"""docket worker register / relaunch."""

from __future__ import annotations

import argparse
from typing import Any

from .context import Context
from .parsing import command, group
from .recorded import recorded

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    worker = group(nouns, "worker", "register and relaunch workers",
                   "docket worker register run-7k2m9x4q --role implementer --id w1")
    p = command(worker, "register", worker_register, common, "register a worker at generation 1",
                "docket worker register run-7k2m9x4q --role implementer --task task-1")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--role", required=True, metavar="ROLE", help="e.g. implementer, reviewer, integrator")
    p.add_argument("--task", metavar="TASK", help="the task it works on (in the same run)")
    p.add_argument("--id", metavar="WORKER", help="worker id (default: a new random id)")
    p = command(worker, "relaunch", worker_relaunch, common, "raise a worker's generation, fencing the old one",
                "docket worker relaunch worker-1")
    p.add_argument("worker", metavar="WORKER", help="the worker id")


def worker_register(ctx: Context) -> int:
    from ..adapters.app import services
    from ..adapters.world.clock import new_id

    a = ctx.args
    worker_id = a.id or new_id("worker")
    appended = services.register_worker(ctx.ledger, ctx.clock, a.run, worker_id, a.role, a.task)
    return recorded(ctx, appended, f"worker {worker_id} registered in run {a.run} (generation 1)",
                    worker_id=worker_id, generation=1)


def worker_relaunch(ctx: Context) -> int:
    from ..adapters.app import services

    appended = services.relaunch_worker(ctx.ledger, ctx.clock, ctx.args.worker)
    event = appended.last[1]
    return recorded(ctx, appended, f"worker {ctx.args.worker} relaunched: generation {event.generation} "
                    f"(generation {event.fenced_generation} fenced)", generation=event.generation)
