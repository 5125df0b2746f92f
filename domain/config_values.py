"""The values docket.toml's fields hold, checked strictly: templates and their placeholders, durations, sizes, paths."""

from __future__ import annotations

import re
from typing import Annotated, Any
from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, ValidationInfo

from .kernel.errors import BadInput
from .kernel.names import check_branch_name, has_unsafe_characters
from .containment.sandbox import extra_path, network_setting
from .kernel.values import parse_cost, parse_duration, parse_size, parse_tokens
from .kernel.codes import Code
from .containment.egress import is_host_list

__all__ = ["check_artifact_dir", "expand", "placeholders"]


# What each kind of template may name: an agent's argv, its environment; a check's argv and environment.
# {requests}: the worker generation's request channel (a socket); {mcp_config}: a Claude Code --mcp-config file
# naming docket's MCP server; {docket}: the docket program itself (to name its MCP server in an agent's own config)
COMMAND_PLACEHOLDERS = frozenset({"prompt", "prompt_file", "worktree", "worker_dir", "port", "requests",
                                  "mcp_config", "docket"})
ENV_PLACEHOLDERS = frozenset({"worktree", "worker_dir", "port", "requests", "mcp_config", "docket"})
CHECK_PLACEHOLDERS = frozenset({"worktree"})
SHELL = "/bin/sh"
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


def expand(template: str, *, worktree: str, worker_dir: str | None = None, port: int | None = None,
           prompt: str | None = None, prompt_file: str | None = None, requests: str | None = None,
           mcp_config: str | None = None, docket: str | None = None) -> str:
    """template with each {name} replaced; a name without a value here is BadInput ``bad-placeholder``."""
    values = {"worktree": worktree, "worker_dir": worker_dir, "port": None if port is None else str(port),
              "prompt": prompt, "prompt_file": prompt_file, "requests": requests, "mcp_config": mcp_config,
              "docket": docket}

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        value = values.get(match.group(1) or "")
        if value is None:
            raise BadInput(Code.BAD_PLACEHOLDER, f"{token!r} in {template!r} has no value here")
        return value

    return _TOKEN.sub(replace, template)


def _check_template(template: str, allowed: frozenset[str]) -> str:
    unknown = sorted({name for name in placeholders(template) if name not in allowed})
    if unknown:
        known = " ".join("{" + name + "}" for name in sorted(allowed))
        raise ValueError(f"unknown placeholder {{{unknown[0]}}} in {template!r} (known here: {known})")
    return template


def _templates_using(allowed: frozenset[str]) -> Any:
    return AfterValidator(lambda template: _check_template(template, allowed))


def _check_argument(argument: str, info: ValidationInfo) -> str:
    """An argument of a check's argv is a template; with shell = true the one script is taken literally
    (braces belong to the shell). Without a valid shell value there is nothing to check against yet."""
    if info.data.get("shell") is False:
        _check_template(argument, CHECK_PLACEHOLDERS)
    return argument


def _duration(value: Any) -> int:
    if not isinstance(value, str):
        raise ValueError('a duration is a string like "45m", "90s" or "1h30m"')
    try:
        return parse_duration(value)
    except BadInput as e:
        raise ValueError(e.message) from None


def _size(value: Any) -> int:
    try:
        return parse_size(value)
    except BadInput as e:
        raise ValueError(e.message) from None


def _cost(value: Any) -> int:
    try:
        return parse_cost(value)
    except BadInput as e:
        raise ValueError(e.message) from None


def _tokens(value: Any) -> int:
    try:
        return parse_tokens(value)
    except BadInput as e:
        raise ValueError(e.message) from None


def _branch(name: str) -> str:
    try:
        return check_branch_name(name)
    except BadInput as e:
        raise ValueError(e.message) from None


def check_artifact_dir(path: str) -> str:
    """The artifact directory's one spelling: a relative POSIX path to a folder inside the repository,
    without '.', empty parts or a trailing '/'. ValueError for an absolute path, a '..' part, NUL or another
    control character, the repository root itself, and git's own folder ('.git', in any case, at any depth)."""
    if has_unsafe_characters(path):
        raise ValueError(f"{path!r} contains NUL or another control or invisible character")
    if path.startswith("/"):
        raise ValueError(f"{path!r} is absolute; name a folder relative to the repository root")
    given = path.split("/")
    if ".." in given:
        raise ValueError(f"{path!r} contains '..'; name a folder inside the repository")
    parts = [part for part in given if part not in ("", ".")]
    if not parts:
        raise ValueError(f"{path!r} is the repository root; name a folder inside it, like \"out\"")
    if any(part.lower() == ".git" for part in parts):
        raise ValueError(f"{path!r} is inside git's own folder (.git); name a folder of the work tree")
    return "/".join(parts)


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
Size = Annotated[int, BeforeValidator(_size)]  # bytes
Cost = Annotated[int, BeforeValidator(_cost)]  # US dollars in docket.toml; millionths of a dollar here
Tokens = Annotated[int, BeforeValidator(_tokens)]
Branch = Annotated[str, AfterValidator(_branch)]
RelativeGlob = Annotated[str, StringConstraints(min_length=1, pattern=r"^[^\x00]*$"), AfterValidator(_relative_glob)]
Argv = Annotated[list[NoNul], Field(min_length=1)]
CheckArgument = Annotated[NoNul, AfterValidator(_check_argument)]
CheckEnvValue = Annotated[NoNul, _templates_using(CHECK_PLACEHOLDERS)]
ArtifactDir = Annotated[str, AfterValidator(check_artifact_dir)]
ExtraPath = Annotated[str, StringConstraints(min_length=1, max_length=4096), AfterValidator(extra_path)]
NetworkValue = Annotated[str | tuple[int, ...] | tuple[str, ...], BeforeValidator(network_setting)]


def _ports_only(network: str | tuple[int, ...] | tuple[str, ...]) -> str | tuple[int, ...] | tuple[str, ...]:
    """A check's or hook's network: "any", "none" or ports; a host list needs the egress proxy, which serves agents
    (whose refusals it records on the worker's stream)."""

    if is_host_list(network):
        raise ValueError("a list of hosts is enforced by docket's egress proxy, which serves agents only; give a "
                         'check or hook "none", "any" or TCP ports (e.g. [443])')
    return network


PortsNetworkValue = Annotated[NetworkValue, AfterValidator(_ports_only)]
