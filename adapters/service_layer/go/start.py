"""Starting a `docket go` run: open it, plan its tasks, record the plan; and check a resumed run against its plan."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ....domain import run as run_aggregate
from ....domain import task as task_aggregate
from ....domain.kernel.errors import Refused
from ....domain.plan import TaskSpec, ledger_task_id
from ...world.clock import Clock
from .session import RunDriver
from ..kernel.ledger import Ledger
from ..use_cases.runs import load_run, open_run
from ..use_cases.tasks import plan_task
from ....domain.kernel.codes import Code

__all__ = ["check_resumed_options", "check_resumed_tasks", "plan_run", "record_configuration", "record_plan", "run_exists",
           "start_run"]

def run_exists(ledger: Ledger, run_id: str) -> bool:
    return ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id)) is not None


def start_run(d: RunDriver, *, run_id: str | None, goal: str, specs: Sequence[TaskSpec], agent: str, target: str,
              budget_ms: int | None, repository: str, cycles: int, parallel: int,
              export_key: tuple[str, str] | None, remote: str | None = None, max_cost_micro_usd: int | None = None,
              max_tokens: int | None = None, configuration: tuple[str | None, Sequence[str]] | None = None) -> str:
    """Open the run, plan its tasks and record the plan; the run's id."""
    from ...world.clock import new_id

    run_id = run_id or new_id("run")
    run = open_run(d.ledger, d.clock, run_id=run_id, intent_id=new_id("intent"), goal=goal, target_branch=target,
                   budget_ms=budget_ms, repository=repository, wait=True, effector=d.effector,
                   remote=remote, max_cost_micro_usd=max_cost_micro_usd, max_tokens=max_tokens)
    if run.status == "failed":
        raise Refused(run.failure_code or "run-failed", run.failure_message or f"run {run_id} could not be opened")
    plan_run(d, run_id, specs, agent, cycles, parallel, export_key, repository=Path(repository),
             configuration=configuration)
    return run_id


def plan_run(d: RunDriver, run_id: str, specs: Sequence[TaskSpec], agent: str, cycles: int, parallel: int,
             export_key: tuple[str, str] | None, *, repository: Path,
             configuration: tuple[str | None, Sequence[str]] | None = None) -> None:
    """Plan each task not planned yet (its prompt stored first, and pushed to the run's shared remote, if it has one,
    for the hosts that may take a task over), then RunPlanned: safe to repeat after a crash."""
    from ...world.files.prompts import store_prompt

    remote = load_run(d.ledger, run_id).remote
    tasks = []
    for spec in specs:
        task_id = ledger_task_id(run_id, spec.id)
        if d.ledger.get(task_aggregate.apply, task_aggregate.stream_of(task_id)) is None:
            sha256, _ = store_prompt(d.docket_dir, spec.prompt)
            if remote is not None:
                from ...world.git.prompt_refs import publish_prompt

                publish_prompt(repository, *remote, spec.prompt)  # unreachable now: pushed again at each launch
            plan_task(d.ledger, d.clock, run_id, task_id, spec.title, prompt_sha256=sha256,
                      prompt_chars=len(spec.prompt))
        tasks.append((task_id, [ledger_task_id(run_id, dependency) for dependency in spec.depends_on]))
    if configuration is not None:  # before the plan: a run planned is a run whose trust is recorded
        record_configuration(d.ledger, d.clock, run_id, *configuration)
    record_plan(d.ledger, d.clock, run_id, tasks, agent, cycles, parallel, export_key)
    d.update_views()


def record_configuration(ledger: Ledger, clock: Clock, run_id: str, config_sha256: str | None,
                         trusted_paths: Sequence[str]) -> None:
    """RunConfigurationRecorded: the digest of the docket.toml the run read and the paths it trusts, once."""
    def decision(now: str) -> list[Any]:
        return run_aggregate.record_configuration(load_run(ledger, run_id), config_sha256=config_sha256,
                                                  trusted_paths=trusted_paths, now=now)

    ledger.decide(decision, clock.now())


def record_plan(ledger: Ledger, clock: Clock, run_id: str, tasks: list[tuple[str, list[str]]], agent: str, cycles: int,
                parallel: int, export_key: tuple[str, str] | None) -> None:
    """RunPlanned for the run's tasks (each with the tasks it depends on), once."""
    def decision(now: str) -> list[Any]:
        return run_aggregate.plan_run(load_run(ledger, run_id), tasks, agent, cycles, parallel, now, export_key)

    ledger.decide(decision, clock.now())


def check_resumed_options(run: run_aggregate.Run, *, goal: str | None, cycles: int | None,
                          agent: str | None) -> None:
    """A planned run resumed with options: each one given is the plan's."""
    assert run.plan is not None
    if goal is not None and goal != run.goal:
        raise Refused(Code.PLAN_DIFFERS, f"run {run.run_id} has another goal; resume it without --goal or with its own")
    if cycles is not None and cycles != run.plan.cycles:
        raise Refused(Code.PLAN_DIFFERS, f"run {run.run_id} was planned with --cycles {run.plan.cycles}")
    if agent is not None and agent != run.plan.agent:
        raise Refused(Code.PLAN_DIFFERS, f"run {run.run_id} was planned with --agent {run.plan.agent}")


def check_resumed_tasks(run: run_aggregate.Run, specs: Sequence[TaskSpec]) -> None:
    """A planned run resumed with its tasks given again: the plan's tasks."""
    assert run.plan is not None
    if [ledger_task_id(run.run_id, spec.id) for spec in specs] != list(run.plan.as_planned().task_ids):
        raise Refused(Code.PLAN_DIFFERS, f"run {run.run_id} was planned with other tasks")
