"""The tasks of docket go: a tasks file's [[tasks]] checked, one clear error for each way it can be wrong."""

from __future__ import annotations

import pytest

from docket.domain.kernel.errors import BadInput
from docket.domain.plan import TaskSpec, ledger_task_id, parse_tasks, short_id, tasks_from_texts


def task(id: str, depends_on: list[str] | None = None, **extra: object) -> dict:  # noqa: A002
    return {"id": id, "title": f"title {id}", "prompt": f"prompt {id}", **({"depends_on": depends_on}
                                                                          if depends_on is not None else {}), **extra}


def test_a_good_file_keeps_its_order_and_dependencies():
    specs = parse_tasks({"tasks": [task("a"), task("b", ["a"]), task("c", ["a", "b"])]})
    assert specs == [TaskSpec("a", "title a", "prompt a"), TaskSpec("b", "title b", "prompt b", ("a",)),
                     TaskSpec("c", "title c", "prompt c", ("a", "b"))]


@pytest.mark.parametrize("document, words", [
    ({}, "no [[tasks]]"),
    ({"tasks": []}, "no [[tasks]]"),
    ({"tasks": [task("a")], "other": 1}, "unknown key 'other'"),
    ({"tasks": [task("a", colour="red")]}, "unknown key 'colour'"),
    ({"tasks": [dict(task("a"), title=3)]}, "title must be a string"),
    ({"tasks": [task("a", "a")]}, "depends_on must be a list"),
    ({"tasks": [task("a"), task("a")]}, "given twice"),
    ({"tasks": [task("a", ["b"]), task("b")]}, "not a task listed before it"),
    ({"tasks": [task("a", ["a"])]}, "depends on itself"),
    ({"tasks": [task("a"), task("b", ["a", "a"])]}, "names a dependency twice"),
    ({"tasks": [task("no/slash")]}, "task id"),
    ({"tasks": [task("x" * 41)]}, "task id"),
    ({"tasks": [dict(task("a"), title="bad \x1b[2J title")]}, "control or invisible"),
    ({"tasks": [dict(task("a"), title=" ")]}, "the title must be"),
    ({"tasks": [dict(task("a"), prompt="  ")]}, "prompt is empty"),
    ({"tasks": [dict(task("a"), prompt="a\x00b")]}, "NUL"),
    ({"tasks": ["not a table"]}, "is not a table"),
])
def test_each_mistake_is_bad_tasks_naming_it(document: dict, words: str):
    with pytest.raises(BadInput) as caught:
        parse_tasks(document, "tasks.toml")
    assert caught.value.code == "bad-tasks" and words in caught.value.message, caught.value.message


def test_task_texts_become_t1_t2_with_the_text_as_title_and_prompt():
    specs = tasks_from_texts(["fix the\nparser", "add tests"])
    assert [(s.id, s.title, s.prompt) for s in specs] == [("t1", "fix the parser", "fix the\nparser"),
                                                           ("t2", "add tests", "add tests")]


def test_ledger_ids_are_scoped_by_run_and_read_back():
    assert ledger_task_id("run-1", "greet") == "run-1.greet"
    assert short_id("run-1", "run-1.greet") == "greet" and short_id("run-1", "other") == "other"
