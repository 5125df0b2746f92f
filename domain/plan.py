"""The tasks of a supervised run (`docket go`): a tasks file's tables checked, and what may start when. Pure.

A tasks file is TOML: a list of ``[[tasks]]`` tables, each with ``id``, ``title``,
``prompt`` and an optional ``depends_on = [ids]``. Ids are short names; the
ledger's task id is ``<run>.<id>``, since task ids are unique across runs. A
task's dependencies come before it in the file, so the file's order is an order
work can be done and integrated in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .kernel.errors import BadInput
from .kernel.names import has_unsafe_characters
from .kernel.codes import Code

__all__ = ["MAX_TASKS", "TaskSpec", "check_tasks", "ledger_task_id", "parse_tasks", "short_id", "tasks_from_texts"]

MAX_TASKS = 1000
MAX_TITLE_CHARS = 4000
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
_KEYS = {"id", "title", "prompt", "depends_on"}


@dataclass(frozen=True)
class TaskSpec:
    id: str  # the short id of the tasks file
    title: str
    prompt: str
    depends_on: tuple[str, ...] = ()


def ledger_task_id(run_id: str, short: str) -> str:
    return f"{run_id}.{short}"


def short_id(run_id: str, task_id: str) -> str:
    prefix = f"{run_id}."
    return task_id[len(prefix):] if task_id.startswith(prefix) else task_id


def tasks_from_texts(texts: list[str]) -> list[TaskSpec]:
    """``--task TEXT`` given once or more: t1, t2, ... each with TEXT as title and prompt."""
    specs = []
    for number, text in enumerate(texts, 1):
        title = " ".join(text.split())[:200] or f"task {number}"
        specs.append(TaskSpec(f"t{number}", title, text))
    return check_tasks(specs)


def parse_tasks(document: dict[str, Any], source: str = "the tasks file") -> list[TaskSpec]:
    """The ``[[tasks]]`` of a parsed TOML document, checked (BadInput ``bad-tasks`` naming what is wrong)."""
    extra = sorted(set(document) - {"tasks"})
    if extra:
        raise BadInput(Code.BAD_TASKS, f"{source}: unknown key {extra[0]!r} (a tasks file holds [[tasks]] tables only)")
    tables = document.get("tasks")
    if not isinstance(tables, list) or not tables:
        raise BadInput(Code.BAD_TASKS, f"{source} has no [[tasks]] table")
    specs = []
    for number, table in enumerate(tables, 1):
        where = f"{source}: task {number}"
        if not isinstance(table, dict):
            raise BadInput(Code.BAD_TASKS, f"{where} is not a table")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise BadInput(Code.BAD_TASKS, f"{where}: unknown key {unknown[0]!r} (known: depends_on, id, prompt, title)")
        for key in ("id", "title", "prompt"):
            if not isinstance(table.get(key), str):
                raise BadInput(Code.BAD_TASKS, f"{where}: {key} must be a string")
        depends = table.get("depends_on", [])
        if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
            raise BadInput(Code.BAD_TASKS, f"{where}: depends_on must be a list of task ids")
        specs.append(TaskSpec(table["id"], table["title"], table["prompt"], tuple(depends)))
    return check_tasks(specs, source)


def check_tasks(specs: list[TaskSpec], source: str = "the tasks") -> list[TaskSpec]:
    if not specs:
        raise BadInput(Code.NO_TASKS, "give at least one task (--task TEXT or --tasks FILE)")
    if len(specs) > MAX_TASKS:
        raise BadInput(Code.BAD_TASKS, f"{source}: at most {MAX_TASKS} tasks, not {len(specs)}")
    seen: set[str] = set()
    for spec in specs:
        if not _ID.match(spec.id):
            raise BadInput(Code.BAD_TASKS, f"{source}: task id {spec.id[:60]!r} must be 1 to 40 letters, digits, "
                                        "'-' or '_', starting with a letter or digit")
        if spec.id in seen:
            raise BadInput(Code.BAD_TASKS, f"{source}: task id {spec.id!r} is given twice")
        if not spec.title.strip() or len(spec.title) > MAX_TITLE_CHARS or has_unsafe_characters(spec.title):
            raise BadInput(Code.BAD_TASKS, f"{source}: task {spec.id}: the title must be 1 to {MAX_TITLE_CHARS} "
                                        "characters without control or invisible characters")
        if not spec.prompt.strip() or "\x00" in spec.prompt:
            raise BadInput(Code.BAD_TASKS, f"{source}: task {spec.id}: the prompt is empty or holds NUL")
        for dependency in spec.depends_on:
            if dependency == spec.id:
                raise BadInput(Code.BAD_TASKS, f"{source}: task {spec.id} depends on itself")
            if dependency not in seen:
                raise BadInput(Code.BAD_TASKS, f"{source}: task {spec.id} depends on {dependency[:60]!r}, which is not "
                                            "a task listed before it")
        if len(set(spec.depends_on)) != len(spec.depends_on):
            raise BadInput(Code.BAD_TASKS, f"{source}: task {spec.id} names a dependency twice")
        seen.add(spec.id)
    return specs
