"""Which agent a launch runs, and with what settings: docket.toml's [agents.NAME], or a command given after --."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ...domain.kernel.errors import BadInput, NotFound
from ...domain.containment.sandbox import Confinement
from ..console.context import Context
from ...domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...adapters.service_layer.use_cases.supervisor import Limits
    from ...adapters.service_layer.use_cases.workers import LaunchRequest

__all__ = ["launch_request"]

COMMAND_AGENT = "command"  # the agent name recorded for a command given on the command line


def launch_request(ctx: Context, run_id: str, task_id: str, worker_id: str, agent: str | None,
                   argv: list[str]) -> tuple[LaunchRequest, Limits]:
    """The LaunchRequest and the supervision limits (timeout_ms, idle_timeout_ms, max_log)."""
    from ...adapters.service_layer.use_cases.supervisor import Limits
    from ...adapters.service_layer.use_cases.workers import LaunchRequest
    from ...adapters.world.files.config_file import load_trusted_config

    from ...adapters.service_layer.go.settings import workspace_root

    config = load_trusted_config(Path.cwd())
    from ...adapters.world.processes.sandbox_roots import require_sandbox

    require_sandbox(Confinement(mode=config.sandbox))  # refused before anything is made or recorded
    if argv and argv[0] == "--":
        argv = argv[1:]
    request = partial(LaunchRequest, run_id=run_id, task_id=task_id, worker_id=worker_id, setup=config.worktree.setup,
                      include=config.worktree.include, ports=config.worktree.ports, artifact_dir=config.artifact_dir,
                      max_file_size=config.candidates.max_file_size, workspace_root=workspace_root(config))
    if argv:
        if agent is not None:
            raise BadInput(Code.AGENT_AND_COMMAND, "give either --agent NAME or a command after --, not both")
        # a command given here is taken literally: braces in it are not placeholders
        literal = [arg.replace("{", "{{").replace("}", "}}") for arg in argv]
        return (request(agent=COMMAND_AGENT, command=literal, confinement=Confinement(mode=config.sandbox)),
                Limits(timeout_ms=None, idle_timeout_ms=None))
    name = agent or config.default_agent or (next(iter(config.agents)) if len(config.agents) == 1 else None)
    if name is None:
        raise BadInput(Code.NO_AGENT, "name an agent with --agent NAME (an [agents.NAME] of docket.toml), or give a "
                                   "command after --")
    chosen = config.agents.get(name)
    if chosen is None:
        known = ", ".join(sorted(config.agents)) or "none"
        raise NotFound(Code.AGENT_NOT_FOUND, f"docket.toml has no [agents.{name}] (configured: {known})")
    return (request(agent=name, command=chosen.command, prompt_mode=chosen.prompt, env=chosen.env,
                    env_allow=chosen.env_allow, report=chosen.report, confinement=config.confinement(chosen)),
            Limits(timeout_ms=chosen.timeout_ms, idle_timeout_ms=chosen.idle_timeout_ms, max_log=chosen.max_log))
