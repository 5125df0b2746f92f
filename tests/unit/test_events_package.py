"""The event catalogue as a package: one module per aggregate, built lazily, validated as strictly as ever."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from docket.domain import events as ev

from .builders import T0

OWNERS = {"LedgerCreated": "ledger", "Run": "run", "Task": "task", "Worktree": "task", "Worker": "worker",
          "Lease": "lease", "Intent": "effect", "Candidate": "candidate", "Check": "candidate",
          "Execution": "candidate", "Handoff": "handoff", "Approval": "integration",
          "Integration": "integration", "Receipt": "integration", "Hook": "hooks",
          "AgentReported": "worker", "Question": "request", "FollowUpProposed": "request", "FollowUpDecided": "request", "AnswerRefused": "request", "AnswerDelivered": "request", "ProgressReported": "request",
          "WorkFinished": "request", "RequestRefused": "request", "EgressRefused": "worker"}


def test_every_name_is_reexported_and_each_event_lives_with_its_aggregate():
    assert all(hasattr(ev, name) for name in ev.__all__)
    for cls in ev.EVENT_TYPES.values():
        assert getattr(ev, cls.__name__) is cls
        (owner,) = [module for prefix, module in OWNERS.items() if cls.name.startswith(prefix)]
        assert cls.__module__ == f"docket.domain.events.{owner}"


def test_unknown_type_names_are_refused():
    assert ev.event_class("RunOpened.v1") is ev.RunOpened
    with pytest.raises(KeyError):
        ev.event_class("RunOpened.v9")


# Runs in a fresh interpreter: there no validator has been built before this code uses it.
FIRST_USE = f"""
import json
from pydantic import ValidationError
from docket.domain import events as ev
report = {{"built_at_import": sorted(t for t, c in ev.EVENT_TYPES.items() if c.__pydantic_complete__), "errors": {{}}}}
for type_name, cls in ev.EVENT_TYPES.items():
    try:
        cls.model_validate({{"stream": "s", "version": "1", "recorded_at": "{T0}", "bogus": 1}})
    except ValidationError as e:
        report["errors"][type_name] = sorted({{(err["loc"][0], err["type"]) for err in e.errors()
                                              if err["loc"][0] in ("version", "bogus")}})
resumed = ev.RunResumed(stream="run:r", version=2, recorded_at="{T0}", run_id="r")
try:
    resumed.run_id = "other"
except ValidationError as e:
    report["frozen"] = e.errors()[0]["type"]
print(json.dumps(report))
"""


def test_validators_are_built_on_first_use_and_are_as_strict_as_before():
    out = subprocess.run([sys.executable, "-c", FIRST_USE], capture_output=True, text=True, check=True).stdout
    report = json.loads(out)
    assert report["built_at_import"] == []  # defer_build: importing the catalogue builds nothing
    expected = [["bogus", "extra_forbidden"], ["version", "int_type"]]  # closed, and strict: "1" is no integer
    assert report["errors"] == {type_name: expected for type_name in ev.EVENT_TYPES}
    assert report["frozen"] == "frozen_instance"


def test_a_built_event_still_refuses_what_it_refused():
    with pytest.raises(ValidationError):
        ev.TaskPlanned(stream="task:t", version=1, recorded_at=T0, task_id="t", run_id="r", title="x", extra=1)
    with pytest.raises(ValidationError):
        ev.TaskPlanned(stream="task:t", version=True, recorded_at=T0, task_id="t", run_id="r", title="x")
