"""Hooks' pure rules: what a selector fires for, one request per (hook, position), and the outcome each observation
decides."""

from __future__ import annotations

import itertools

import pytest

from docket.domain import events as ev
from docket.domain import hooks
from docket.domain.effects import Act, Unknown
from docket.domain.hooks import HookCommand, HookObservation

from .builders import T0

COMMANDS = {"task-finished": HookCommand(("notify", "done"), 60_000), "needs-attention": HookCommand(("page",), 5_000,
                                                                                                     ("PAGER_*",))}
PLACES = dict(repository="/repo", ledger="/repo/.git/docket/ledger.sqlite", directory="/repo/.git/docket/hooks")


def ids():
    counter = itertools.count(1)
    return lambda: f"hook-{next(counter)}"


def test_aliases_and_type_names_select_event_types():
    assert hooks.types_of("task-finished") == ("TaskFinished.v1",)
    assert set(hooks.types_of("check-failed")) == {"CheckFailed.v1", "CheckTimedOut.v1"}
    assert set(hooks.types_of("run-finished")) == {"RunCompleted.v1", "RunAborted.v1", "RunBudgetExhausted.v1",
                                                   "RunUsageExhausted.v1"}
    assert set(hooks.types_of("TaskPlanned")) == {"TaskPlanned.v1", "TaskPlanned.v2"}  # every version
    assert hooks.types_of("TaskPlanned.v2") == ("TaskPlanned.v2",)
    assert {"IntentOutcomeUnknown.v1", "IntentOutcomeUnknown.v2", "IntegrationStepConflicted.v1",
            "IntegrationTargetMoved.v1", "RunBudgetExhausted.v1", "RunUsageExhausted.v1", "RunWaiting.v1"} <= set(
        hooks.types_of("needs-attention"))


@pytest.mark.parametrize("selector", ["task_finished", "TaskFinished.v9", "", "HookFinished", "HookRequested.v1"])
def test_an_unknown_selector_or_a_hooks_own_event_is_refused_naming_the_aliases(selector):
    with pytest.raises(ValueError) as refused:
        hooks.check_selector(selector)
    assert "task-finished" in str(refused.value) or "cannot fire for hooks" in str(refused.value)


def test_needs_attention_fires_for_a_failed_task_only():
    assert hooks.matches("needs-attention", "TaskFinished.v1", {"result": "failed"})
    assert not hooks.matches("needs-attention", "TaskFinished.v1", {"result": "passed"})
    assert hooks.matches("task-finished", "TaskFinished.v1", {"result": "passed"})
    assert not hooks.matches("task-finished", "RunAborted.v1", {})


@pytest.mark.parametrize("selector", ["question-asked", "needs-attention"])
def test_a_person_is_called_for_a_question_and_for_a_follow_up_queued_for_them_only(selector):
    assert hooks.matches(selector, "QuestionAsked.v1", {"reason": "blocked"})
    assert hooks.matches(selector, "FollowUpProposed.v1", {"decision": "queued"})
    assert not hooks.matches(selector, "FollowUpProposed.v1", {"decision": "accepted"})
    assert not hooks.matches(selector, "FollowUpProposed.v1", {"decision": "refused"})
    assert hooks.matches("FollowUpProposed", "FollowUpProposed.v1", {"decision": "accepted"})  # by its own name


def test_each_hook_and_position_is_requested_once():
    fired = [("task-finished", 7, "TaskFinished.v1"), ("needs-attention", 7, "TaskFinished.v1"),
             ("task-finished", 7, "TaskFinished.v1")]
    made = hooks.request(None, "r1", fired, COMMANDS, ids(), T0, **PLACES)
    assert [(e.hook, e.position, e.version) for e in made] == [("task-finished", 7, 1), ("needs-attention", 7, 2)]
    assert made[1].argv == ["page"] and made[1].timeout_ms == 5_000 and made[1].env_allow == ["PAGER_*"]
    state = None
    for position, event in enumerate(made, start=10):
        state = hooks.apply(state, event, position)
    assert hooks.request(state, "r1", fired, COMMANDS, ids(), T0, **PLACES) == []
    later = hooks.request(state, "r1", [("task-finished", 9, "TaskFinished.v1")], COMMANDS, ids(), T0, **PLACES)
    assert [(e.position, e.version) for e in later] == [(9, 3)]


def _requested() -> tuple[hooks.Hooks, ev.HookRequested]:
    (intent,) = hooks.request(None, "r1", [("task-finished", 7, "TaskFinished.v1")], COMMANDS, ids(), T0, **PLACES)
    return hooks.apply(None, intent, 10), intent


def test_no_marker_or_an_orphaned_command_is_acted_on_and_a_live_claim_is_waited_for():
    state, intent = _requested()
    assert isinstance(hooks.decide(state, intent, HookObservation("absent"), T0), Act)
    assert isinstance(hooks.decide(state, intent, HookObservation("orphaned", started=True), T0), Act)
    assert isinstance(hooks.decide(state, intent, HookObservation("running", detail="pid 9 alive"), T0), Unknown)
    assert isinstance(hooks.decide(state, intent, HookObservation("unknown", detail="another host"), T0), Unknown)


def test_a_written_result_is_recorded_as_it_is():
    state, intent = _requested()
    outcome = hooks.decide(state, intent, HookObservation("finished", detail="the hook's command exited 3",
                                                          started=True, result="failed", exit_code=3,
                                                          duration_ms=12, output_sha256="0" * 64, output_bytes=5,
                                                          tail="boom"), T0)
    assert isinstance(outcome, ev.HookFinished) and outcome.version == 2 and outcome.stream == "hooks:r1"
    assert (outcome.result, outcome.exit_code, outcome.tail, outcome.message) == ("failed", 3, "boom",
                                                                                  "the hook's command exited 3")
    assert hooks.apply(state, outcome, 11).requests[0].result == "failed"


@pytest.mark.parametrize("started, says", [(False, "did not run"), (True, "may have run")])
def test_a_claim_whose_process_died_is_interrupted_and_says_whether_its_command_started(started, says):
    state, intent = _requested()
    outcome = hooks.decide(state, intent, HookObservation("ended", started=started), T0)
    assert outcome.result == "interrupted" and says in outcome.message and outcome.exit_code is None


def test_a_hook_is_an_argv_list_or_a_table_with_a_timeout_and_env_allow():
    from docket.domain.config import Config

    config = Config.model_validate({"hooks": {"task-finished": ["notify", "done"],
                                              "RunAborted": {"command": ["page"], "timeout": "5s",
                                                             "env_allow": ["PAGER_*"]}}})
    assert config.hooks["task-finished"].command == ["notify", "done"]
    assert config.hooks["task-finished"].timeout_ms == 60_000  # the default
    assert config.hooks["RunAborted"].timeout_ms == 5_000 and config.hooks["RunAborted"].env_allow == ["PAGER_*"]


def test_the_hooks_state_has_a_snapshot_form():
    from docket.domain.kernel.snapshot import from_value, to_value

    state, intent = _requested()
    state = hooks.apply(state, hooks.decide(state, intent, HookObservation("ended"), T0), 11)
    assert from_value(hooks.Hooks, to_value(state)) == state
