"""docket.toml as values: agents, checks, worktree preparation and run defaults, parsed strictly. Pure.

An unknown key or a wrong type is an error (pydantic, strict, extra keys forbidden);
durations become milliseconds; every placeholder in a template is checked when the
file is parsed, so a launch never discovers a typo.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationInfo,
                      field_validator, model_validator)

from .kernel.canonical import canonical_json
from .events.base import Id
from .containment.protected import DEFAULT_PROTECTED
from .containment.sandbox import Confinement
from .kernel.values import DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_LOG, parse_duration
from .config_values import (
    Argument, Argv, ArtifactDir, Branch, CheckArgument, CheckEnvValue, Cost, Duration, EnvName, EnvPattern,
    EnvValue, ExtraPath, NetworkValue, PortsNetworkValue, RelativeGlob, SHELL, Size, Tokens, check_artifact_dir,
    expand, placeholders)
from .config_default import DEFAULT_TOML
from .containment.processes import looks_secret_value

__all__ = [
    "AgentConfig", "CandidatesConfig", "CheckConfig", "Config", "DEFAULT_TOML", "GitConfig", "HookConfig",
    "IntegrationConfig", "RunConfig", "WorktreeConfig", "check_artifact_dir", "check_config_sha256", "expand",
    "placeholders",
]


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
    # The checks `docket go` runs at once for a run (its tasks', its base's and its merge queue's together; agents
    # are counted apart, by --parallel); --checks overrides it. Unset: the machine's cores.
    checks: Annotated[int, Field(ge=1, le=256)] | None = None


class CandidatesConfig(_Section):
    """[candidates]: what a capture of a task's worktree may hold."""

    # A file larger than this that the base does not already hold at its path refuses the pin (file-too-large)
    # before any object of it is written: git objects are held in memory whole, and a dataset or a build's output
    # is rarely work to deliver.
    max_file_size: Size = DEFAULT_MAX_FILE_SIZE


SPECULATIVE_BATCH = 4  # [integration] batch's default while speculate > 1 (docs/performance.md: the queue bench)


class IntegrationConfig(_Section):
    """[integration]: how `docket integrate` merges a run's confirmed candidates."""

    approval: bool = False  # wait until `docket approve` approved every candidate the queue would merge
    # A target branch checked out in a worktree: "update" moves that worktree's index and files with it when they
    # are clean (git's updateInstead); "refuse" never moves a checked-out branch (git's denyCurrentBranch).
    checked_out_target: Literal["update", "refuse"] = "update"
    # The required checks run once on the merged result of up to this many queued steps (1: once per step); a
    # batch that fails is bisected to the step that breaks it, which goes back to its task, and the rest land.
    # Unset: SPECULATIVE_BATCH while the queue speculates (batches then form only from steps that piled up while
    # every verification was busy), else 1.
    batch: Annotated[int, Field(ge=1, le=1000)] | None = None
    # Verifications in flight at once: entry k is checked on the merge of everything queued ahead of it while those
    # are still being checked; a failure ahead cancels and redoes only what was built on it. Unset: the run's check
    # concurrency ([run] checks, --checks). 1: one verification at a time.
    speculate: Annotated[int, Field(ge=1, le=256)] | None = None

    def batch_for(self, speculate: int) -> int:
        """The batch size a queue verifying speculate ranges at once uses."""
        return self.batch or (SPECULATIVE_BATCH if speculate > 1 else 1)


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
