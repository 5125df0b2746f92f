"""docket task plan."""

from __future__ import annotations

import argparse
from typing import Any

from .context import Context
from .parsing import command, group
from .recorded import recorded

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    task = group(nouns, "task", "plan tasks", "docket task plan run-7k2m9x4q --title 'write the parser'")
    p = command(task, "plan", task_plan, common, "plan a task inside a run",
                "docket task plan run-7k2m9x4q --title 'write the parser'")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--title", required=True, metavar="TEXT", help="what the task is")
    p.add_argument("--id", metavar="TASK", help="task id (default: a new random id)")


def task_plan(ctx: Context) -> int:
    from ..adapters.app import services
    from ..adapters.world.clock import new_id

    task_id = ctx.args.id or new_id("task")
    appended = services.plan_task(ctx.ledger, ctx.clock, ctx.args.run, task_id, ctx.args.title)
    return recorded(ctx, appended, f"task {task_id} planned in run {ctx.args.run}", task_id=task_id)
