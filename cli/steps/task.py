"""docket task plan."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group
from ..console.recorded import recorded

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    task = group(nouns, "task", "plan tasks", "docket task plan run-7k2m9x4q --title 'write the parser'")
    p = command(task, "plan", task_plan, common, "plan a task inside a run",
                "docket task plan run-7k2m9x4q --title 'write the parser'")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--title", required=True, metavar="TEXT", help="what the task is")
    p.add_argument("--id", metavar="TASK", help="task id (default: a new random id)")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", help="the agent's instructions (default: the title)")
    prompt.add_argument("--prompt-file", metavar="FILE", help="read the instructions from FILE ('-': standard input)")


def task_plan(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.tasks import plan_task
    from ...adapters.world.clock import new_id

    a = ctx.args
    task_id = a.id or new_id("task")
    text = a.prompt if a.prompt is not None else _read_prompt_file(a.prompt_file) if a.prompt_file else None
    sha256 = None
    if text is not None:
        from ...adapters.world.files.prompts import store_prompt

        ctx.require_ledger_file()
        sha256, _ = store_prompt(ctx.paths.ledger.parent, text)  # the text is there before the event names it
    appended = plan_task(ctx.ledger, ctx.clock, a.run, task_id, a.title, prompt_sha256=sha256,
                         prompt_chars=len(text) if text is not None else 0)
    return recorded(ctx, appended, f"task {task_id} planned in run {a.run}", task_id=task_id,
                    prompt_sha256=sha256)


def _read_prompt_file(name: str) -> str:
    from ...adapters.world.files.prompts import MAX_PROMPT_BYTES
    from ..console.text_files import read_text

    return read_text(name, limit=MAX_PROMPT_BYTES, code="bad-prompt-file", stdin=True)
