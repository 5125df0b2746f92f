"""docket.toml as values: agents, checks, worktree preparation and run defaults, parsed strictly. Pure.

An unknown key or a wrong type is an error (pydantic, strict, extra keys forbidden);
durations become milliseconds; every placeholder in a template is checked when the
file is parsed, so a launch never discovers a typo.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationInfo,
                      field_validator, model_validator)

from .kernel.canonical import canonical_json
from .kernel.errors import BadInput
from .events.base import Id
from .kernel.names import check_branch_name, has_unsafe_characters
from .containment.protected import DEFAULT_PROTECTED
from .containment.sandbox import Confinement, extra_path, network_setting
from .kernel.values import DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_LOG, parse_cost, parse_duration, parse_size, parse_tokens
from .kernel.codes import Code

__all__ = ["AgentConfig", "CandidatesConfig", "CheckConfig", "Config", "DEFAULT_TOML", "GitConfig", "HookConfig", "IntegrationConfig", "RunConfig", "WorktreeConfig",
           "check_artifact_dir", "check_config_sha256", "expand", "placeholders"]

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
    from .containment.egress import is_host_list

    if is_host_list(network):
        raise ValueError("a list of hosts is enforced by docket's egress proxy, which serves agents only; give a "
                         'check or hook "none", "any" or TCP ports (e.g. [443])')
    return network


PortsNetworkValue = Annotated[NetworkValue, AfterValidator(_ports_only)]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class AgentConfig(_Section):
    """[agents.NAME]: how to start one coding agent, without a shell."""

    command: Annotated[list[Argument], Field(min_length=1)]
    prompt: Literal["argument", "stdin", "file"] = "argument"
    report: Literal["none", "claude-json", "codex-jsonl", "aider"] = "none"  # what its output reports: AgentReported
    env: dict[EnvName, EnvValue] = {}
    env_allow: list[EnvPattern] = []
    timeout_ms: Duration | None = Field(None, alias="timeout")
    idle_timeout_ms: Duration | None = Field(None, alias="idle_timeout")
    # The sandbox's extras: paths it may also read (its own config folder, say "~/.claude") or write; its network.
    read: list[ExtraPath] = []
    write: list[ExtraPath] = []
    # Hosts it may reach through docket's egress proxy, ports, "none" or "any". Not set: its model API's hosts when
    # its program is one docs/agents.md has a block for (claude, codex, aider: domain/containment/egress.py), else "any".
    network: NetworkValue = "any"
    # Its log's cap: past it the middle is cut (head and tail kept, a line says how much), recorded in WorkerExited
    max_log: Size = DEFAULT_MAX_LOG

    @model_validator(mode="before")
    @classmethod
    def _network_of_its_program(cls, data: Any) -> Any:
        if isinstance(data, dict) and "network" not in data:
            from .containment.egress import default_network

            command = data.get("command")
            hosts = default_network(command if isinstance(command, list) else None)
            if hosts != "any":
                return {**data, "network": list(hosts)}
        return data

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


class CheckConfig(_Section):
    """[checks.NAME]: one check, run in a fresh execution worktree at exactly a candidate's commit."""

    shell: bool = False  # declared before command: command's rules depend on it
    command: Annotated[list[CheckArgument], Field(min_length=1)]
    timeout_ms: Duration = Field(parse_duration("10m"), alias="timeout")
    idle_timeout_ms: Duration | None = Field(None, alias="idle_timeout")
    required: bool = True  # a candidate is handed off only when every required check passed on it
    env: dict[EnvName, CheckEnvValue] = {}
    env_allow: list[EnvPattern] = []
    # A JUnit XML report the check writes (relative to its execution's root): failing tests named in feedback.
    junit: ArtifactDir | None = None
    # "exit": passed when the command exits 0. "relative-to-base": also passed when every test failing (by the
    # junit report) was failing on the run's base already.
    judge: Literal["exit", "relative-to-base"] = "exit"
    read: list[ExtraPath] = []  # e.g. a virtual environment or toolchain outside the execution
    write: list[ExtraPath] = []
    network: PortsNetworkValue = "none"  # it runs code the agent wrote: no TCP unless the configuration says so
    # Paths a candidate cannot weaken (domain/containment/protected.py): one that changes them is also checked on the base-tests
    # tree (its code, the base's files of these paths) and passes only if both pass; [] turns it off for this check.
    protected: list[RelativeGlob] = list(DEFAULT_PROTECTED)

    @model_validator(mode="after")
    def _relative_needs_a_report(self) -> CheckConfig:
        if self.judge == "relative-to-base" and self.junit is None:
            raise ValueError('judge = "relative-to-base" compares failing tests by id: set junit to the JUnit XML '
                             'report the command writes (e.g. junit = "out/junit.xml")')
        return self

    @field_validator("command")
    @classmethod
    def _one_script_for_the_shell(cls, command: list[str], info: ValidationInfo) -> list[str]:
        if not command[0].strip():  # a check that runs nothing would pass
            raise ValueError("command[0] is blank: name the program (with shell = true, the script) to run")
        if info.data.get("shell") and len(command) != 1:
            raise ValueError(f"shell = true runs one script with {SHELL} -c, so command must be exactly one "
                             f"string (the script), not {len(command)}; join them into one script or drop shell")
        return command

    def argv(self, execution: str) -> tuple[str, ...]:
        """The exact argv to run, execution being the path of the check's execution worktree."""
        if self.shell:
            return (SHELL, "-c", self.command[0])
        return tuple(expand(argument, worktree=execution) for argument in self.command)

    def environment(self, execution: str) -> dict[str, str]:
        """The extra variables of env, their {worktree} filled in."""
        return {name: expand(value, worktree=execution) for name, value in self.env.items()}


def check_config_sha256(name: str, check: CheckConfig) -> str:
    """The digest a check's result is bound to: every setting that decides what ran and what its result means.

    Spelling does not count (key order, "1h" or "60m", the order of env_allow's patterns); any other change does.
    """
    document = {"name": name, "command": check.command, "shell": check.shell, "timeout_ms": check.timeout_ms,
                "idle_timeout_ms": check.idle_timeout_ms, "required": check.required, "env": check.env,
                "env_allow": sorted(set(check.env_allow))}
    if check.junit is not None:  # only when set: the digests of checks configured before these keys stay
        document["junit"] = check.junit
    if check.judge != "exit":
        document["judge"] = check.judge
    for key, default in (("read", []), ("write", []), ("network", "none")):
        if getattr(check, key) != default:  # only when set, as junit
            value = getattr(check, key)
            document[key] = list(value) if isinstance(value, tuple) else value
    if sorted(set(check.protected)) != sorted(DEFAULT_PROTECTED):  # only when set: the digests recorded before it stay
        document["protected"] = sorted(set(check.protected))
    return hashlib.sha256(canonical_json(document)).hexdigest()


class WorktreeConfig(_Section):
    """[worktree]: what a new task worktree gets before its agent starts."""

    setup: list[Argv] = []  # argv lists, run in the new worktree in order
    include: list[RelativeGlob] = []  # ignored files copied from the main checkout
    ports: bool = False  # a free TCP port per worker, in DOCKET_PORT


def _absolute_or_home(root: str) -> str:
    if not (root.startswith("/") or root == "~" or root.startswith("~/")):
        raise ValueError(f"{root!r} is neither an absolute path nor under ~/")
    if "\0" in root:
        raise ValueError("a NUL character in the path")
    return root


class WorkspaceConfig(_Section):
    """[workspace]: where agents and checks work (each task a repository of its own, outside the user's)."""

    # workspaces/<repository key>/<run>/<task> and executions/... are made under it; None: docket's data folder
    # ($XDG_DATA_HOME/docket, else ~/.local/share/docket)
    root: Annotated[str, AfterValidator(_absolute_or_home)] | None = None


class RunConfig(_Section):
    """[run]: defaults for `docket run open`."""

    target: Branch | None = None
    budget_ms: Duration | None = Field(None, alias="budget")
    max_cost_micro_usd: Cost | None = Field(None, alias="max_cost")
    max_tokens: Tokens | None = None


class CandidatesConfig(_Section):
    """[candidates]: what a capture of a task's worktree may hold."""

    # A file larger than this that the base does not already hold at its path refuses the pin (file-too-large)
    # before any object of it is written: git objects are held in memory whole, and a dataset or a build's output
    # is rarely work to deliver.
    max_file_size: Size = DEFAULT_MAX_FILE_SIZE


class IntegrationConfig(_Section):
    """[integration]: how `docket integrate` merges a run's confirmed candidates."""

    approval: bool = False  # wait until `docket approve` approved every candidate the queue would merge
    # A target branch checked out in a worktree: "update" moves that worktree's index and files with it when they
    # are clean (git's updateInstead); "refuse" never moves a checked-out branch (git's denyCurrentBranch).
    checked_out_target: Literal["update", "refuse"] = "update"
    # The required checks run once on the merged result of up to this many queued steps (1: once per step); a
    # batch that fails is bisected to the step that breaks it, which goes back to its task, and the rest land.
    batch: Annotated[int, Field(ge=1, le=1000)] = 1


Identity = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class InboxConfig(_Section):
    """[inbox]: who may answer agents' questions besides the local user, and what a question's deadline does."""

    trusted: Annotated[list[Identity], Field(max_length=1000)] = []
    deadline_ms: Duration | None = Field(None, alias="deadline")
    on_deadline: Literal["wait", "default", "fail"] = "wait"
    default_answer: Annotated[str, StringConstraints(min_length=1, max_length=4000, pattern=r"^[^\x00]*$")] | None = None
    proposals: Literal["accept", "queue", "refuse"] = "queue"

    @model_validator(mode="after")
    def _default_is_given(self) -> "InboxConfig":
        if self.on_deadline == "default" and self.default_answer is None:
            raise ValueError('on_deadline = "default" needs default_answer: the answer a question without choices '
                             "gets at its deadline (one with choices gets its first)")
        return self


class LedgerConfig(_Section):
    """[ledger]: url, a postgresql:// URL: the ledger is that PostgreSQL database (several machines share it); read
    by adapters/world/files/paths.py before anything else, which refuses a password in it (the file is committed)."""

    url: Annotated[str, StringConstraints(pattern=r"^postgres(ql)?://", max_length=2000)] | None = None


class GitConfig(_Section):
    """[git]: remote, the name of a remote in the repository's config that several machines share: a run's base is
    that remote's target branch, its candidates are pushed there (create-only) and its target moved there
    (compare-and-swap, nothing forced)."""

    remote: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None = None


def _check_hook_selector(selector: str) -> str:
    from .hooks import check_selector  # the event catalogue, only when [hooks] names something

    return check_selector(selector)


def _hook_table(value: Any) -> Any:
    """A hook is an argv list, or a table with command (and timeout, env_allow)."""
    return {"command": value} if isinstance(value, list) else value


class HookConfig(_Section):
    """[hooks]: one event selector -> the command run, once per matching event of a run, with it on stdin."""

    command: Argv
    timeout_ms: Duration = Field(parse_duration("60s"), alias="timeout")
    env_allow: list[EnvPattern] = []
    read: list[ExtraPath] = []
    write: list[ExtraPath] = []  # beside its working directory, the repository's root
    network: PortsNetworkValue = "any"  # a hook notifies: a chat, a pager

    @field_validator("command")
    @classmethod
    def _recordable(cls, command: list[str]) -> list[str]:
        from .containment.processes import looks_secret_value

        if not command[0].strip():
            raise ValueError("command[0] is blank: name the program to run")
        for i, argument in enumerate(command):
            if looks_secret_value(argument):
                raise ValueError(f"command[{i}] looks like a credential; a hook's command is recorded in the ledger, "
                                 "so pass secrets in the environment and let them through with env_allow")
        return command


HookSelector = Annotated[str, StringConstraints(min_length=1), AfterValidator(_check_hook_selector)]
HookEntry = Annotated[HookConfig, BeforeValidator(_hook_table)]


class Config(_Section):
    # Fields are validated in this order: the checks of agents and agent see the sections before them.
    worktree: WorktreeConfig = WorktreeConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    run: RunConfig = RunConfig()
    integration: IntegrationConfig = IntegrationConfig()
    candidates: CandidatesConfig = CandidatesConfig()
    ledger: LedgerConfig = LedgerConfig()
    git: GitConfig = GitConfig()
    inbox: InboxConfig = InboxConfig()
    agents: dict[Id, AgentConfig] = {}
    default_agent: Id | None = Field(None, alias="agent")
    checks: dict[Id, CheckConfig] = {}
    artifact_dir: ArtifactDir | None = None  # None: checks' output is not copied back
    hooks: dict[HookSelector, HookEntry] = {}
    # "landlock": every agent, check and hook runs in a sandbox, and docket refuses to launch where the kernel has
    # none; "off" (only ever explicitly) runs them with everything the user may do, and every view of a run says so.
    sandbox: Literal["landlock", "off"] = "landlock"

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

    def confinement(self, section: AgentConfig | CheckConfig | HookConfig) -> Confinement:
        """What the sandbox of a launch of this agent, check or hook is asked to be."""
        return Confinement(mode=self.sandbox, read=tuple(section.read), write=tuple(section.write),
                           network=section.network)

    def required_checks(self) -> list[str]:
        """The names of the checks a candidate must pass, sorted."""
        return sorted(name for name, check in self.checks.items() if check.required)

    def widenings(self) -> list[str]:
        """What this configuration grants beyond docket's defaults, each named as docket.toml spells it: extra read
        or write roots, an environment allow-list, a network written out (other than "none"), hooks (commands run on a
        run's events), identities trusted to answer the inbox, ignored files of the checkout copied into workspaces, the
        ledger's database, and sandbox = "off". A repository's docket.toml is
        honoured for these only once its user trusts that very file (adapters/world/files/user_config.py)."""
        found = ['sandbox = "off"'] if self.sandbox == "off" else []
        sections: list[tuple[str, AgentConfig | CheckConfig]] = [
            *((f"[agents.{n}]", a) for n, a in sorted(self.agents.items())),
            *((f"[checks.{n}]", c) for n, c in sorted(self.checks.items()))]
        for where, section in sections:
            found += [f"{where} {key}" for key in ("read", "write", "env_allow") if getattr(section, key)]
            if "network" in section.model_fields_set and section.network != "none":
                found.append(f"{where} network")  # written out: the user's word on it, not the default's
        found += [f"[hooks] {selector!r}" for selector in sorted(self.hooks)]
        if self.inbox.trusted:
            found.append("[inbox] trusted")
        if self.worktree.include:  # files of your checkout (an ignored .env, say) copied into every workspace
            found.append("[worktree] include")
        if self.ledger.url:  # where docket writes the ledger
            found.append("[ledger] url")
        return found

    def trusted_commands(self) -> list[list[str]]:
        """The commands whose repository files a run trusts (domain/containment/trust.py): every check's (a shell check's as
        the shell runs it), every hook's and every [worktree] setup command."""
        checks = [["sh", "-c", " ".join(c.command)] if c.shell else list(c.command) for c in self.checks.values()]
        return [*checks, *(list(h.command) for h in self.hooks.values()), *(list(a) for a in self.worktree.setup)]

    def warnings(self) -> list[tuple[str, str]]:
        """(code, message) for each setting that is valid but weakens what docket promises: shown, never refused."""
        found = []
        sections = ([(f"[agents.{n}]", a.env_allow) for n, a in sorted(self.agents.items())]
                    + [(f"[checks.{n}]", c.env_allow) for n, c in sorted(self.checks.items())]
                    + [(f"[hooks] {s!r}", h.env_allow) for s, h in sorted(self.hooks.items())])
        for where, allow in sections:
            if "*" in allow:
                found.append(("env-allow-everything", f"{where} env_allow = [\"*\"] lets every credential in "
                              "docket's environment through to the process (its values are still redacted from "
                              "what docket records); name the variables it needs instead"))
        return found


DEFAULT_TOML = '''\
# docket.toml: how docket runs coding agents in this repository (docs: docs/configuration.md).
# Every key is optional; an unknown key or a wrong type is an error naming the key and its line.
# Durations are strings like "90s", "45m", "1h30m", "2d".

# The agent `docket worker launch` starts when no --agent is given (must name an [agents.NAME] below).
# agent = "claude"

# A folder (relative to the repository root, not inside .git) where checks write what is worth keeping:
# reports, coverage. Untracked files a check writes there are copied back to the task's worktree (each
# replacing an earlier check's file at its path, hash-checked, never through a symlink), and untracked files
# there are left out of candidates.
# Not set: nothing is copied back.
# artifact_dir = "out/docket"

# Every agent, check and hook runs in a sandbox (Landlock): it writes only its workspace (a check: its execution),
# its own folders and a private TMPDIR, and reads only system folders, its PATH's installs and what it is given.
# Where the kernel has no Landlock, docket refuses to launch unless this says "off" (docs/security.md, "The sandbox").
# sandbox = "landlock"

# [agents.NAME]: one coding agent. command is an argv list, run without a shell.
# prompt says how the task's prompt reaches it:
#   "argument" (default): an argument contains {prompt}; "file": an argument contains {prompt_file};
#   "stdin": the prompt is written to the agent's standard input.
# env: extra variables; values may use {worktree}, {worker_dir} and {port} (give each worker its own config home).
# env_allow: variable names or globs (* ?) let through the credential scrub of the agent's environment.
# timeout: stop the agent after this long; idle_timeout: stop it after this long without output.
# report: "claude-json", "codex-jsonl" or "aider": read the agent's session, tokens and cost from its output when it
#   exits (AgentReported); docs/agents.md says which flags make each agent print them.
# Placeholders: {worktree} {worker_dir} {port} {prompt} {prompt_file}, and for docket's MCP server {requests}
#   {mcp_config} {docket}; write {{ or }} for a literal brace.
# read, write: extra paths its sandbox allows (absolute or ~/..., e.g. read = ["~/.claude"]);
# network: hosts it may reach through docket's egress proxy (e.g. ["api.anthropic.com", "*.example.com:8443"]),
#   TCP ports it may connect to directly (e.g. [443]), "none" or "any"; not set: claude, codex and aider get their
#   model API's hosts, other commands "any"; checks default to "none" (ports only, as hooks).

# Tested blocks for Codex CLI, Claude Code and aider, and why each flag is there: docs/agents.md.

# [agents.claude]
# command = ["claude", "-p", "--permission-mode", "acceptEdits", "--allowedTools", "Bash,mcp__docket", "--mcp-config", "{mcp_config}", "--strict-mcp-config", "--output-format", "json"]
# prompt = "stdin"
# report = "claude-json"
# env = { CLAUDE_CONFIG_DIR = "{worker_dir}/claude" }
# env_allow = ["ANTHROPIC_API_KEY"]
# timeout = "45m"

# [agents.codex]
# command = ["codex", "exec", "--json", "--sandbox", "danger-full-access", "-c", 'mcp_servers.docket.command="{docket}"', "-c", 'mcp_servers.docket.args=["mcp", "--socket", "{requests}"]', "-c", "mcp_servers.docket.required=true", "-c", "mcp_servers.docket.startup_timeout_sec=30", "-"]  # inside docket's sandbox (docs/agents.md)
# prompt = "stdin"
# report = "codex-jsonl"
# env = { CODEX_HOME = "{worker_dir}" }
# env_allow = ["OPENAI_API_KEY", "CODEX_API_KEY"]
# timeout = "45m"
# idle_timeout = "15m"

# [agents.aider]
# command = ["aider", "--yes-always", "--no-check-update", "--no-gitignore", "--no-auto-commits", "--no-dirty-commits", "--no-analytics", "--no-pretty", "--chat-history-file", "{worker_dir}/aider.chat.history.md", "--input-history-file", "{worker_dir}/aider.input.history", "--message-file", "{prompt_file}"]
# prompt = "file"
# report = "aider"
# env = { HOME = "{worker_dir}", GIT_CONFIG_COUNT = "2", GIT_CONFIG_KEY_0 = "user.name", GIT_CONFIG_VALUE_0 = "aider", GIT_CONFIG_KEY_1 = "user.email", GIT_CONFIG_VALUE_1 = "aider@localhost" }
# env_allow = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]
# timeout = "1h"
# idle_timeout = "10m"

# [checks.NAME]: one check `docket check run` runs against a pinned candidate, in a fresh worktree at exactly
# the candidate's commit (its working directory). It passes when it exits 0.
# command is an argv list, run without a shell; {worktree} is that worktree's path.
# With shell = true, command is exactly one string: a script run with /bin/sh -c, taken literally
#   (no placeholders; braces are the shell's).
# timeout (default "10m"), idle_timeout, env and env_allow: as for agents; env values may use {worktree}.
# A candidate is handed off only when every required check passed on it; required = false only reports.

# [checks.tests]
# command = ["python", "-m", "pytest", "-q", "--junitxml={worktree}/out/docket/junit.xml"]
# timeout = "20m"
# junit = "out/docket/junit.xml"   # its report: the failing tests and their assertions go to the agent
# judge = "relative-to-base"       # pass when no test fails that did not fail on the run's base already
# protected = ["tests/**", "test/**", "**/conftest.py", "**/test_*.py", "**/*_test.py", "pytest.ini",
#              "pyproject.toml", "setup.cfg", "tox.ini"]
#   (the default) a candidate changing these is also checked with the base's copy of them; [] turns it off

# [checks.lint]
# command = ["ruff check . && ruff format --check ."]
# shell = true
# required = false
# timeout = "5m"

# The tables below show their defaults, commented out: a key added at the end of this file stays a
# top-level key, and lands in a table only under that table's header, uncommented.

# [worktree]
# Commands run in each new task worktree before its agent starts (argv lists, no shell).
# setup = []            # e.g. [["npm", "ci"], ["make", "deps"]]
# Ignored files copied from the main checkout into each new worktree (globs relative to the repository root).
# include = []          # e.g. [".env", "config/*.local"]
# Give each worker a free TCP port in DOCKET_PORT (and {port}).
# ports = false

# [workspace]
# Where each task's workspace (a repository of its own that borrows this repository's objects) and each check's
# execution are made: <root>/workspaces/<repository id>/<run>/<task>. An absolute path, or one under ~/.
# root = "~/.local/share/docket"   # the default: $XDG_DATA_HOME/docket

# [run]
# Default target branch of `docket run open`.
# target = "main"
# Default budget of a run: active time only (time without a supervising docket is not billed).
# budget = "4h"
# Stop a run (budget-limited, its agents stopped) once what its agents reported they used reaches this cost in US
# dollars, or this many tokens (input and output together). Only agents whose block names a report format
# (report = "claude-json", "codex-jsonl" or "aider") report any; a figure an agent did not report counts as 0.
# max_cost = 2.50
# max_tokens = 2000000

# [integration]
# Make `docket integrate` wait until `docket approve RUN --by NAME` approved every candidate it would merge.
# approval = false
# A target branch checked out in a worktree (say main, in your own checkout): "update" moves that worktree's
# index and files to the integrated commit with the branch when they are clean (nothing staged, changed or
# untracked), and refuses (target-checked-out) otherwise; "refuse" never moves a checked-out branch.
# checked_out_target = "update"
# Run the required checks once on the merged result of up to this many queued steps rather than on each step's
# merge; a batch that fails is bisected (deterministically) to the first step whose merge fails, which goes back
# to its task as feedback while the steps before it land and the steps after it are merged again. 1: each step.
# batch = 1

# [candidates]
# A file the agent leaves larger than this (and not already the base's at its path) refuses the pin
# (file-too-large, naming the path and its size) before any object of it is written; the task's generation
# fails with that feedback and the run goes on. Sizes: a number of bytes, or "100MB", "1GiB", "512KiB".
# max_file_size = "100MiB"

# [ledger]
# The ledger in a PostgreSQL database that several machines share, instead of the file in the repository's docket
# folder (DOCKET_DATABASE_URL, when set, is used instead). No password here, the file is committed: PGPASSWORD or
# ~/.pgpass hold it. Each machine keeps its own views of it.
# url = "postgresql://docket@db.internal/docket"

# [git]
# A remote (its name in the repository's config) that several machines share: a run's base is that remote's
# target branch, every candidate is pushed there under refs/docket/candidates/... (create-only), and the target is
# moved there by compare-and-swap, nothing forced; your clone's own branch is yours to pull. Unset: this repository.
# remote = "origin"

# [inbox]
# Who may answer an agent's question (docket answer) besides the local user: names given with --as.
# trusted = []          # e.g. ["ada@example.com"]
# How long a question waits for its answer (unset: no deadline), and what happens then: "wait" on, answer
# "default" (the first of its choices, else default_answer), or "fail" the task's generation.
# deadline = "2h"
# on_deadline = "wait"
# default_answer = "No one answered in time: decide yourself, and say what you decided."
# What a follow-up task an agent proposes becomes: "queue" it for a person, "accept" it, or "refuse" it.
# proposals = "queue"

# [hooks]
# A command run once for each matching event of a run that `docket go` supervises, with the event as
# JSON on stdin ({position, stream, type, recorded_at, payload}) and DOCKET_RUN, DOCKET_EVENT, DOCKET_POSITION,
# DOCKET_HOOK, DOCKET_TASK, DOCKET_LEDGER, DOCKET_HOST in a scrubbed environment; cwd is the repository root; no shell.
# Keys: task-finished, check-failed, run-finished, needs-attention (a task failed, a merge conflicted or was
# rejected, the target moved, the budget ran out, an effect's outcome is unknown), or an event type name
# (TaskFinished, or TaskFinished.v1 for one version). Values: an argv list, or a table with command,
# timeout (default "60s") and env_allow. A hook's failure is recorded and never stops the run.
# run-finished = ["notify-send", "docket run finished"]
# needs-attention = { command = ["./scripts/page-me.sh"], timeout = "30s", env_allow = ["PAGER_TOKEN"] }
'''
