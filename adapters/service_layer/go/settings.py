"""What `docket go` runs a planned run with: the plan's agent and the checks, worktree and integration options of
docket.toml, read once per supervising process."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_LOG
from ....domain.containment.sandbox import Confinement
from ....domain.kernel.errors import BadInput, NotFound
from ..use_cases.checks import CheckSpec
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ....domain.config import Config

__all__ = ["Agent", "GoSettings", "agent_named", "planned_agent", "settings_from_config", "workspace_root"]


@dataclass(frozen=True)
class Agent:
    """How to start the plan's agent (docket.toml's [agents.NAME])."""

    name: str
    command: tuple[str, ...]
    prompt_mode: str = "argument"
    env: Mapping[str, str] = field(default_factory=dict)
    env_allow: tuple[str, ...] = ()
    timeout_ms: int | None = None
    idle_timeout_ms: int | None = None
    report: str = "none"
    confinement: Confinement = Confinement()
    max_log: int = DEFAULT_MAX_LOG  # [agents.NAME] max_log


@dataclass(frozen=True)
class GoSettings:
    agent: Agent
    checks: tuple[CheckSpec, ...]  # every configured check; the required ones judge a candidate
    approval: bool
    docket_dir: Path
    repository: Path  # the git common dir
    main_checkout: Path | None
    ledger_path: Path
    artifact_dir: str | None = None
    setup: tuple[tuple[str, ...], ...] = ()
    include: tuple[str, ...] = ()
    ports: bool = False
    checked_out_target: Literal["update", "refuse"] = "update"  # a target checked out in a clean worktree: update it with the branch
    workspace_root: Path | None = None  # [workspace] root; None: docket's data folder
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # [candidates] max_file_size
    batch: int = 1  # [integration] batch: the merge queue's steps one check run covers at most
    speculate: int = 1  # [integration] speculate: the queue's verifications in flight at once
    check_slots: int = field(default_factory=lambda: default_checks())  # --checks, [run] checks: checks at once
    inbox: Any = None  # [inbox]: what decides its agents' requests (domain.requests.InboxPolicy)

    @property
    def required(self) -> tuple[CheckSpec, ...]:
        return tuple(spec for spec in self.checks if spec.required)


def inbox_policy(config: Config) -> Any:
    """docket.toml's [inbox] as the policy its agents' requests are decided by."""
    from ....domain.requests import InboxPolicy

    inbox = config.inbox
    return InboxPolicy(deadline_ms=inbox.deadline_ms, on_deadline=inbox.on_deadline,
                       default_answer=inbox.default_answer, proposals=inbox.proposals)


def agent_named(config: Config, wanted: str | None) -> str:
    """The agent a new plan names: the one asked for, else docket.toml's 'agent', else the only one configured."""
    name = wanted or config.default_agent or (next(iter(config.agents)) if len(config.agents) == 1 else None)
    if name is None:
        raise BadInput(Code.NO_AGENT, "name an agent with --agent NAME (an [agents.NAME] of docket.toml)")
    if name not in config.agents:
        known = ", ".join(sorted(config.agents)) or "none"
        raise NotFound(Code.AGENT_NOT_FOUND, f"docket.toml has no [agents.{name}] (configured: {known})")
    return name


def planned_agent(config: Config, name: str) -> Agent:
    """The agent the run was planned with, as docket.toml configures it now."""
    chosen = config.agents.get(name)
    if chosen is None:
        raise NotFound(Code.AGENT_NOT_FOUND, f"docket.toml has no [agents.{name}], the agent this run was "
                                          "planned with")
    return Agent(name, tuple(chosen.command), chosen.prompt, dict(chosen.env), tuple(chosen.env_allow),
                 chosen.timeout_ms, chosen.idle_timeout_ms, chosen.report, config.confinement(chosen), chosen.max_log)


def workspace_root(config: Config) -> Path | None:
    """[workspace] root as a path (~ expanded); None when not set (docket's data folder)."""
    return Path(config.workspace.root).expanduser() if config.workspace.root else None


def settings_from_config(config: Config, agent: Agent, *, repository: Path, ledger_path: Path,
                         checks: int | None = None) -> GoSettings:
    """The settings a run is supervised with, from docket.toml: its agent, checks, worktree and integration.
    ``checks``: the checks run at once (--checks), else docket.toml's [run] checks, else the machine's cores."""
    from ...world.files.paths import main_worktree
    from ...world.processes.sandbox_roots import require_sandbox

    require_sandbox(agent.confinement)  # refused before anything starts, where no sandbox can be had
    specs = tuple(CheckSpec.of(name, check, sandbox=config.sandbox) for name, check in sorted(config.checks.items()))
    slots = checks or config.run.checks or default_checks()
    speculate = config.integration.speculate or slots
    return GoSettings(agent=agent, checks=specs, approval=config.integration.approval,
                      docket_dir=ledger_path.parent, repository=repository,
                      main_checkout=main_worktree(repository), ledger_path=ledger_path,
                      artifact_dir=config.artifact_dir, setup=tuple(tuple(argv) for argv in config.worktree.setup),
                      include=tuple(config.worktree.include), ports=config.worktree.ports,
                      checked_out_target=config.integration.checked_out_target,
                      workspace_root=workspace_root(config), max_file_size=config.candidates.max_file_size,
                      batch=config.integration.batch_for(speculate), speculate=speculate,
                      check_slots=slots, inbox=inbox_policy(config))


def default_checks() -> int:
    """The check concurrency when none is configured: the machine's cores (agents mostly wait on their model,
    checks use the CPU)."""
    import os

    return max(1, os.cpu_count() or 1)
