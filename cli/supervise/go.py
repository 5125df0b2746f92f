"""docket go / docket supervise: a whole multi-agent run from one command, continued after any crash."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..console.context import Context
from ..console.parsing import command
from ...domain.kernel.codes import Code
from .go_supervision import _driver, _require_workspaces, _supervise_to_end, _unfinished_runs, _wait_for_runs

if TYPE_CHECKING:
    from ...domain.config import Config

__all__ = ["register", "register_supervise"]

DEFAULT_CYCLES = 3
DEFAULT_PARALLEL = 4


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "go", go, common,
                "run an agent per task in parallel, check each result (relaunching with the failure as feedback "
                "until it passes or its cycles are spent), integrate what passed, seal the receipt "
                "(exit 0: all delivered, 6: some task failed or nothing integrated, 7: stopped, aborted or out of "
                "budget, 8: waiting for you: the target's checkout has changes where the delivered tree writes, or "
                "approval is due; the summary says what to do, then 'docket go --resume RUN')",
                "docket go --goal 'greet by name' --tasks tasks.toml --agent claude --parallel 3 --budget 2h\n"
                "  docket go --resume run-7k2m9x4q")
    p.add_argument("--goal", metavar="TEXT", help="what the run is for")
    p.add_argument("--task", action="append", metavar="TEXT", dest="task_texts",
                   help="a task (its title and prompt; repeatable; ids t1, t2, ...)")
    p.add_argument("--tasks", metavar="FILE", help="a TOML file of [[tasks]] with id, title, prompt, depends_on")
    p.add_argument("--agent", metavar="NAME", help="an [agents.NAME] of docket.toml (default: its 'agent', or the "
                                                   "only one configured)")
    p.add_argument("--target", metavar="BRANCH", help="target branch (default: docket.toml's [run] target, else the "
                                                      "branch checked out in the main checkout)")
    p.add_argument("--budget", metavar="DURATION", help="time budget of the run, e.g. 2h (active time only)")
    p.add_argument("--max-cost", metavar="USD", help="stop the run once its agents reported this cost in US dollars, "
                                                    "e.g. 2.50 (default: docket.toml's [run] max_cost)")
    p.add_argument("--max-tokens", metavar="N", help="stop the run once its agents reported this many tokens, input "
                                                    "and output together (default: docket.toml's [run] max_tokens)")
    p.add_argument("--parallel", type=_count(64), metavar="N", help=f"agents at once (default {DEFAULT_PARALLEL})")
    p.add_argument("--checks", type=_count(256), metavar="N",
                   help="checks at once: the tasks', the base's and the merge queue's together (default: docket.toml's "
                        "[run] checks, else the machine's cores)")
    p.add_argument("--cycles", type=_count(100), metavar="N",
                   help=f"attempts judged per task before it fails (default {DEFAULT_CYCLES})")
    p.add_argument("--key", metavar="KEY", help="export the sealed receipt signed with this private key (the plan "
                                                "records it: --resume exports with it)")
    p.add_argument("--id", metavar="RUN", help="the new run's id (default: a new random id)")
    p.add_argument("--resume", metavar="RUN", help="continue an unfinished run from the ledger")


def register_supervise(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "supervise", supervise, common,
                "continue every unfinished run `docket go` planned: drive pending intents, record dead workers, "
                "relaunch within their cycles, integrate and seal (--once: recover them and return)",
                "docket supervise --once")
    p.add_argument("--once", action="store_true", help="recover each unfinished run once, without launching agents")
    p.add_argument("--follow", action="store_true",
                   help="keep supervising until interrupted: runs opened later (on this machine or another that "
                        "shares the ledger) are taken up too, each standing by while another supervisor drives it")
    p.add_argument("--key", metavar="KEY", help="export each sealed receipt signed with this private key")


def _count(limit: int) -> Any:
    def parse(text: str) -> int:
        from ...domain.kernel.errors import BadInput

        if not text.isdigit() or not 1 <= int(text[:6]) <= limit or len(text) > 6:
            raise BadInput(Code.BAD_COUNT, f"{text[:20]!r} is not a whole number from 1 to {limit}")
        return int(text)
    return parse


# --- docket go -----------------------------------------------------------------------------------------------------


def go(ctx: Context) -> int:
    from ...adapters.world.processes.process_tree import become_subreaper
    from ..console.output import finish_despite_output

    finish_despite_output()  # a run whose output went away (a closed terminal, stdout) still ends: its work is its own
    become_subreaper()  # what the agents, checks and hooks it launches leave is adopted here, and stopped
    a = ctx.args
    config = _config()
    _warn_open_network(ctx, config)
    _watch_ledger(ctx)
    _warn_clock_skew(ctx)
    if a.resume is None and a.id is not None and _exists(ctx, a.id):
        a.resume = a.id  # the same command again, after a crash: it goes on with that run
    if a.resume is not None:
        run_id = a.resume
        _check_resume(ctx, run_id, config)
    else:
        run_id = _start(ctx, config)
    return _supervise_to_end(ctx, config, run_id, parallel=a.parallel, key=a.key, checks=a.checks)


def _warn_open_network(ctx: Context, config: Config) -> None:
    """A shared ledger's database is reached over TCP: an agent whose sandbox may connect anywhere can reach it too,
    with only the database's own logins in its way."""
    from ..console.output import warn

    if ctx.paths.url is None or config.sandbox == "off":
        return  # a file ledger has no port; with no sandbox at all, `unsandboxed` says more
    for name, agent in sorted(config.agents.items()):
        if agent.network == "any":
            warn("network-open", f"agent {name} may connect anywhere, the shared ledger's database included: give "
                                 "its [agents] block network = [\"api.example.com\"] (its model API's host, reached "
                                 "through docket's egress proxy) or [443]")


CLOCK_SKEW_WARN_MS = 2_000


def _warn_clock_skew(ctx: Context) -> None:
    """On a shared ledger, leases are judged by the times hosts record: a host whose clock is off takes another's
    run over before that one stopped (fenced: nothing is done twice, but its agents' time is lost), or waits for a
    lease that expired long ago."""
    from ..console.output import warn

    skew = ctx.ledger.clock_skew_ms(ctx.clock) if ctx.paths.url is not None else None
    if skew is not None and abs(skew) > CLOCK_SKEW_WARN_MS:
        warn("clock-skew", f"this host's clock is {abs(skew) / 1000:.1f} s {'ahead of' if skew > 0 else 'behind'} "
                           "the database server's; leases on a shared ledger are judged by the times hosts record, "
                           "so this host may take a run over from a host that is still at work (which is then "
                           "stopped, nothing done twice) or wait too long for one that is gone: set its clock by "
                           "NTP")


def _watch_ledger(ctx: Context) -> None:
    """From here on, this process knows its ledger file's identity and the chain head it wrote: the target moves
    and the receipt is sealed only while both are as it knows them (adapters/world/ledger/ledger_watch.py)."""
    from ...adapters.world.ledger.ledger_watch import watch_database, watch_ledger

    ctx.ledger.watch = watch_ledger(ctx.paths.ledger) if ctx.paths.url is None else watch_database(ctx.paths.url)


def _exists(ctx: Context, run_id: str) -> bool:
    from ...adapters.service_layer.go.start import run_exists

    return run_exists(ctx.ledger, run_id)


def _config() -> Config:
    from ...adapters.world.files.config_file import load_trusted_config
    from ..console.output import warn

    config = load_trusted_config(Path.cwd())
    for code, message in config.warnings():
        warn(code, message)
    return config


def _specs(ctx: Context) -> list[Any]:
    from ...domain.kernel.errors import BadInput
    from ...domain.plan import parse_tasks, tasks_from_texts
    from ..console.parsing import UsageError

    a = ctx.args
    if a.tasks and a.task_texts:
        raise UsageError("give either --task TEXT ... or --tasks FILE, not both")
    if a.task_texts:
        return tasks_from_texts(a.task_texts)
    if a.tasks:
        import tomllib

        text = _read_tasks_file(a.tasks)
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise BadInput(Code.BAD_TASKS, f"{a.tasks}: {e}") from None
        return parse_tasks(document, a.tasks)
    return []


def _read_tasks_file(name: str) -> str:
    from ..console.text_files import read_text

    return read_text(name, limit=4 << 20, code="bad-tasks-file")


def _start(ctx: Context, config: Config) -> str:
    """Open the run, plan its tasks and record the plan; the run's id."""
    from ...adapters.service_layer.go.delivery import export_key
    from ...adapters.service_layer.go.settings import agent_named
    from ...adapters.service_layer.go.start import start_run
    from ...domain.kernel.values import parse_cost, parse_duration, parse_tokens
    from ..console.parsing import UsageError

    a = ctx.args
    if not a.goal:
        raise UsageError("docket go needs --goal TEXT (or --resume RUN)")
    specs = _specs(ctx)
    if not specs:
        raise UsageError("docket go needs --task TEXT (repeatable) or --tasks FILE")
    repository = ctx.require_repository()
    _require_workspaces(repository)
    agent = agent_named(config, a.agent)
    target = a.target or config.run.target or _checked_out_target(repository)
    budget_ms = parse_duration(a.budget) if a.budget is not None else config.run.budget_ms
    max_cost = parse_cost(a.max_cost) if a.max_cost is not None else config.run.max_cost_micro_usd
    max_tokens = parse_tokens(a.max_tokens) if a.max_tokens is not None else config.run.max_tokens
    key = export_key(a.key)  # a bad key fails before any work
    _warn_no_checks(config)
    return start_run(_driver(ctx), run_id=a.id, goal=a.goal, specs=specs, agent=agent, target=target,
                     budget_ms=budget_ms, repository=str(repository), cycles=a.cycles or DEFAULT_CYCLES,
                     parallel=a.parallel or DEFAULT_PARALLEL, export_key=key, remote=config.git.remote,
                     max_cost_micro_usd=max_cost, max_tokens=max_tokens,
                     configuration=_trusted(config, repository))


def _warn_no_checks(config: Config) -> None:
    from ..console.output import warn

    if not config.required_checks():
        warn("no-checks", "docket.toml has no required check ([checks.NAME]): each task's work will be delivered "
                          "as its agent leaves it, not checked")


def _trusted(config: Config, repository: Path) -> tuple[str | None, list[str]]:
    """What the run trusts: the digest of the docket.toml it read, and the paths no candidate changes unapproved."""
    from ...adapters.world.files.config_file import find_config, trusted_configuration
    from ...adapters.world.files.paths import main_worktree

    return trusted_configuration(find_config(Path.cwd()), config, main_worktree(repository) or repository)


def _checked_out_target(repository: Path) -> str:
    """No --target and no [run] target: the branch checked out in the main checkout, said on stderr."""
    from ...adapters.world.files.paths import checked_out_branch, main_worktree
    from ...domain.kernel.errors import BadInput
    from ..console.output import info, shown

    branch = checked_out_branch(repository)
    if branch is None:
        raise BadInput(Code.NO_TARGET, "name the target branch with --target BRANCH (or set [run] target in "
                                    "docket.toml): the main checkout has no branch checked out")
    info(f"target {shown(branch)} (the branch checked out in {shown(str(main_worktree(repository)))})")
    return branch


def _check_resume(ctx: Context, run_id: str, config: Config) -> None:
    """A run to resume: planned (or its planning finished now from the options), its options the same."""
    from ...adapters.service_layer.go.start import check_resumed_options, check_resumed_tasks
    from ...adapters.service_layer.use_cases.runs import load_run
    from ...domain.kernel.errors import Refused

    a = ctx.args
    run = load_run(ctx.ledger, run_id)
    if run.plan is None:
        from ...adapters.service_layer.go.delivery import export_key
        from ...adapters.service_layer.go.settings import agent_named
        from ...adapters.service_layer.go.start import plan_run

        specs = _specs(ctx)
        if not specs:
            raise Refused(Code.RUN_NOT_PLANNED, f"run {run_id} was not planned by docket go; give its --task or --tasks "
                                             "again to finish planning it")
        agent, key = agent_named(config, a.agent), export_key(a.key)
        repository = ctx.require_repository()
        _warn_no_checks(config)
        plan_run(_driver(ctx), run_id, specs, agent, a.cycles or DEFAULT_CYCLES, a.parallel or DEFAULT_PARALLEL, key,
                 repository=repository, configuration=_trusted(config, repository))
        return
    check_resumed_options(run, goal=a.goal, cycles=a.cycles, agent=a.agent)
    specs = _specs(ctx)
    if specs:
        check_resumed_tasks(run, specs)


# --- docket supervise ----------------------------------------------------------------------------------------------


def supervise(ctx: Context) -> int:
    import threading

    from ...adapters.service_layer.go.recovery import recover
    from ...adapters.service_layer.use_cases.runs import load_run
    from ..console.output import emit, finish_despite_output, shown

    finish_despite_output()  # as docket go: the runs are driven to their ends whatever becomes of the output
    if ctx.args.once and ctx.args.follow:
        from ..console.parsing import UsageError

        raise UsageError("--once recovers and returns; --follow never returns: choose one")
    unfinished = _unfinished_runs(ctx)
    config = _config() if (unfinished or ctx.args.follow) and not ctx.args.once else None
    _watch_ledger(ctx)
    _warn_clock_skew(ctx)
    documents: list[dict[str, Any]] = []
    code = 0
    seen: set[str] = set()
    interrupted = threading.Event()
    while not interrupted.is_set():
        for run_id in unfinished:
            seen.add(run_id)
            if ctx.args.once:
                documents.append({"run_id": run_id, "recovered": recover(_driver(ctx), run_id)})
                continue
            # recovered by drive_run once this supervisor holds the run: never beside another that drives it
            assert config is not None  # loaded above: there are runs to supervise
            code = max(code, _supervise_to_end(ctx, config, run_id, parallel=None, key=ctx.args.key,
                                               show=not ctx.json, interrupted=interrupted))
            documents.append({"run_id": run_id, "status": load_run(ctx.ledger, run_id).status})
            if interrupted.is_set():
                break
        if not ctx.args.follow or _wait_for_runs(interrupted):
            break
        ctx.update_views()
        unfinished = [run_id for run_id in _unfinished_runs(ctx) if run_id not in seen]
    lines = [f"{len(seen)} unfinished run(s)"]
    for doc in documents:
        lines.append(f"  {shown(doc['run_id'])}: " + (", ".join(doc.get("recovered", [])) or "nothing to recover"
                                                      if ctx.args.once else doc["status"]))
    if ctx.args.once or ctx.json:
        emit(ctx.json, {"runs": documents}, "\n".join(lines))
    return code
