"""docket.toml as values: agents, worktree preparation and run defaults, parsed strictly. Pure.

An unknown key or a wrong type is an error (pydantic, strict, extra keys forbidden);
durations become milliseconds; every placeholder in a template is checked when the
file is parsed, so a launch never discovers a typo.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationInfo,
                      field_validator, model_validator)

from .errors import BadInput
from .events.base import Id
from .names import check_branch_name
from .values import parse_duration

__all__ = ["AgentConfig", "Config", "DEFAULT_TOML", "RunConfig", "WorktreeConfig", "expand", "placeholders"]

# What each kind of template may name: an agent's argv, its environment.
COMMAND_PLACEHOLDERS = frozenset({"prompt", "prompt_file", "worktree", "worker_dir", "port"})
ENV_PLACEHOLDERS = frozenset({"worktree", "worker_dir", "port"})
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def placeholders(template: str) -> list[str]:
    """The names a template uses, in order; a stray '{' or '}' is a ValueError ('{{' and '}}' escape a brace)."""
    names = []
    for match in _TOKEN.finditer(template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise ValueError(f"{template!r} has a lone {token!r} (write {token * 2!r} for a literal brace)")
        names.append(match.group(1))
    return names


def expand(template: str, *, worktree: str, worker_dir: str, port: int | None, prompt: str | None = None,
           prompt_file: str | None = None) -> str:
    """template with each {name} replaced; a name without a value here is BadInput ``bad-placeholder``."""
    values = {"worktree": worktree, "worker_dir": worker_dir, "port": None if port is None else str(port),
              "prompt": prompt, "prompt_file": prompt_file}

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        value = values.get(match.group(1) or "")
        if value is None:
            raise BadInput("bad-placeholder", f"{token!r} in {template!r} has no value here")
        return value

    return _TOKEN.sub(replace, template)


def _templates_using(allowed: frozenset[str]) -> Any:
    def check(template: str) -> str:
        unknown = sorted({name for name in placeholders(template) if name not in allowed})
        if unknown:
            known = " ".join("{" + name + "}" for name in sorted(allowed))
            raise ValueError(f"unknown placeholder {{{unknown[0]}}} in {template!r} (known here: {known})")
        return template
    return AfterValidator(check)


def _duration(value: Any) -> int:
    if not isinstance(value, str):
        raise ValueError('a duration is a string like "45m", "90s" or "1h30m"')
    try:
        return parse_duration(value)
    except BadInput as e:
        raise ValueError(e.message) from None


def _branch(name: str) -> str:
    try:
        return check_branch_name(name)
    except BadInput as e:
        raise ValueError(e.message) from None


def _relative_glob(pattern: str) -> str:
    if pattern.startswith("/"):
        raise ValueError(f"{pattern!r} is absolute; name files relative to the repository root")
    if ".." in pattern.split("/"):
        raise ValueError(f"{pattern!r} contains '..'")
    return pattern


NoNul = Annotated[str, StringConstraints(pattern=r"^[^\x00]*$")]
Argument = Annotated[NoNul, _templates_using(COMMAND_PLACEHOLDERS)]
EnvValue = Annotated[NoNul, _templates_using(ENV_PLACEHOLDERS)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
EnvPattern = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_*?]+$")]  # a name, or a glob of names
Duration = Annotated[int, BeforeValidator(_duration)]  # milliseconds
Branch = Annotated[str, AfterValidator(_branch)]
RelativeGlob = Annotated[str, StringConstraints(min_length=1, pattern=r"^[^\x00]*$"), AfterValidator(_relative_glob)]
Argv = Annotated[list[NoNul], Field(min_length=1)]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class AgentConfig(_Section):
    """[agents.NAME]: how to start one coding agent, without a shell."""

    command: Annotated[list[Argument], Field(min_length=1)]
    prompt: Literal["argument", "stdin", "file"] = "argument"
    env: dict[EnvName, EnvValue] = {}
    env_allow: list[EnvPattern] = []
    timeout_ms: Duration | None = Field(None, alias="timeout")
    idle_timeout_ms: Duration | None = Field(None, alias="idle_timeout")

    @model_validator(mode="after")
    def _prompt_reaches_the_agent(self) -> AgentConfig:
        needed = {"argument": "prompt", "file": "prompt_file"}.get(self.prompt)
        used = {name for arg in self.command for name in placeholders(arg)}
        if needed and needed not in used:
            raise ValueError(f'prompt = "{self.prompt}" needs {{{needed}}} in an argument of command')
        if self.prompt == "stdin" and used & {"prompt", "prompt_file"}:
            raise ValueError('prompt = "stdin" sends the prompt on stdin; command cannot use {prompt} or {prompt_file}')
        return self

    def uses_port(self) -> bool:
        templates = [*self.command, *self.env.values()]
        return any("port" in placeholders(template) for template in templates)


class WorktreeConfig(_Section):
    """[worktree]: what a new task worktree gets before its agent starts."""

    setup: list[Argv] = []  # argv lists, run in the new worktree in order
    include: list[RelativeGlob] = []  # ignored files copied from the main checkout
    ports: bool = False  # a free TCP port per worker, in DOCKET_PORT


class RunConfig(_Section):
    """[run]: defaults for `docket run open`."""

    target: Branch | None = None
    budget_ms: Duration | None = Field(None, alias="budget")


class Config(_Section):
    # Fields are validated in this order: the checks of agents and agent see the sections before them.
    worktree: WorktreeConfig = WorktreeConfig()
    run: RunConfig = RunConfig()
    agents: dict[Id, AgentConfig] = {}
    default_agent: Id | None = Field(None, alias="agent")

    @field_validator("agents")
    @classmethod
    def _ports_for_port(cls, agents: dict[str, AgentConfig], info: ValidationInfo) -> dict[str, AgentConfig]:
        worktree = info.data.get("worktree")
        if worktree is not None and not worktree.ports:
            for name, agent in sorted(agents.items()):
                if agent.uses_port():
                    raise ValueError(f"[agents.{name}] uses {{port}}, which needs ports = true in [worktree]")
        return agents

    @field_validator("default_agent")
    @classmethod
    def _names_an_agent(cls, name: str | None, info: ValidationInfo) -> str | None:
        agents = info.data.get("agents")
        if name is not None and agents is not None and name not in agents:
            configured = ", ".join(sorted(agents)) or "none"
            raise ValueError(f"{name!r} names no [agents.{name}] (configured: {configured})")
        return name


DEFAULT_TOML = '''\
# docket.toml: how docket runs coding agents in this repository (docs: README.md, "Configuration").
# Every key is optional; an unknown key or a wrong type is an error naming the key and its line.
# Durations are strings like "90s", "45m", "1h30m", "2d".

# The agent `docket worker launch` starts when no --agent is given (must name an [agents.NAME] below).
# agent = "claude"

# [agents.NAME]: one coding agent. command is an argv list, run without a shell.
# prompt says how the task's prompt reaches it:
#   "argument" (default): an argument contains {prompt}; "file": an argument contains {prompt_file};
#   "stdin": the prompt is written to the agent's standard input.
# env: extra variables; values may use {worktree}, {worker_dir} and {port} (give each worker its own config home).
# env_allow: variable names or globs (* ?) let through the credential scrub of the agent's environment.
# timeout: stop the agent after this long; idle_timeout: stop it after this long without output.
# Placeholders: {worktree} {worker_dir} {port} {prompt} {prompt_file}; write {{ or }} for a literal brace.

# [agents.claude]
# command = ["claude", "-p", "{prompt}"]
# env = { CLAUDE_CONFIG_DIR = "{worker_dir}/claude" }
# env_allow = ["ANTHROPIC_API_KEY"]
# timeout = "45m"
# idle_timeout = "10m"

# [agents.codex]
# command = ["codex", "exec", "-"]
# prompt = "stdin"
# env = { CODEX_HOME = "{worker_dir}/codex" }
# env_allow = ["OPENAI_API_KEY"]
# timeout = "45m"

# [agents.aider]
# command = ["aider", "--yes-always", "--message-file", "{prompt_file}"]
# prompt = "file"
# env_allow = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]
# timeout = "1h"

[worktree]
# Commands run in each new task worktree before its agent starts (argv lists, no shell).
setup = []            # e.g. [["npm", "ci"], ["make", "deps"]]
# Ignored files copied from the main checkout into each new worktree (globs relative to the repository root).
include = []          # e.g. [".env", "config/*.local"]
# Give each worker a free TCP port in DOCKET_PORT (and {port}).
ports = false

[run]
# Default target branch of `docket run open`.
# target = "main"
# Default budget of a run: active time only (time without a supervising docket is not billed).
# budget = "4h"
'''
