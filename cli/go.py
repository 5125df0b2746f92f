"""docket go / docket supervise: a whole multi-agent run from one command, continued after any crash."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .context import Context
from .parsing import command
from ..domain.kernel.codes import Code

__all__ = ["register", "register_supervise"]

DEFAULT_CYCLES = 3
DEFAULT_PARALLEL = 4
GO_EXIT = {"delivered": 0, "failed": 6, "stopped": 7, "waiting": 8}
# each outcome of domain/reports/outcome.py as the summary's "outcome" (GO_EXIT's class): a run closed short of delivering
# every task failed; an open run docket go let go of is stopped, or waits for you
GO_OUTCOMES = {"delivered": "delivered", "partly-delivered": "failed", "nothing-delivered": "failed",
               "stopped": "stopped", "waiting-for-you": "waiting", "running": "stopped"}


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
        from ..domain.kernel.errors import BadInput

        if not text.isdigit() or not 1 <= int(text[:6]) <= limit or len(text) > 6:
            raise BadInput(Code.BAD_COUNT, f"{text[:20]!r} is not a whole number from 1 to {limit}")
        return int(text)
    return parse


# --- docket go -----------------------------------------------------------------------------------------------------


def go(ctx: Context) -> int:
    from ..adapters.world.processes.process_tree import become_subreaper
    from .output import finish_despite_output

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
    return _supervise_to_end(ctx, config, run_id, parallel=a.parallel, key=a.key)


def _warn_open_network(ctx: Context, config: Any) -> None:
    """A shared ledger's database is reached over TCP: an agent whose sandbox may connect anywhere can reach it too,
    with only the database's own logins in its way."""
    from .output import warn

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
    from .output import warn

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
    from ..adapters.world.ledger.ledger_watch import watch_database, watch_ledger

    ctx.ledger.watch = watch_ledger(ctx.paths.ledger) if ctx.paths.url is None else watch_database(ctx.paths.url)


def _exists(ctx: Context, run_id: str) -> bool:
    from ..adapters.service_layer.go.start import run_exists

    return run_exists(ctx.ledger, run_id)


def _driver(ctx: Context) -> Any:
    """The service layer's hold on this command's ledger, reader and views."""
    from ..adapters.service_layer.go.session import RunDriver

    return RunDriver(ctx.ledger, ctx.clock, ctx.effector, ctx.paths.ledger, ctx.lock_timeout,
                     reader=lambda: ctx.ledger_reader, views=ctx.views, update_views=ctx.update_views)


def _config() -> Any:
    from ..adapters.world.files.config_file import load_trusted_config
    from .output import warn

    config = load_trusted_config(Path.cwd())
    for code, message in config.warnings():
        warn(code, message)
    return config


def _specs(ctx: Context) -> list[Any]:
    from ..domain.kernel.errors import BadInput
    from ..domain.plan import parse_tasks, tasks_from_texts
    from .parsing import UsageError

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
    from .text_files import read_text

    return read_text(name, limit=4 << 20, code="bad-tasks-file")


def _start(ctx: Context, config: Any) -> str:
    """Open the run, plan its tasks and record the plan; the run's id."""
    from ..adapters.service_layer.go.delivery import export_key
    from ..adapters.service_layer.go.settings import agent_named
    from ..adapters.service_layer.go.start import start_run
    from ..domain.kernel.values import parse_cost, parse_duration, parse_tokens
    from .parsing import UsageError

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


def _warn_no_checks(config: Any) -> None:
    from .output import warn

    if not config.required_checks():
        warn("no-checks", "docket.toml has no required check ([checks.NAME]): each task's work will be delivered "
                          "as its agent leaves it, not checked")


def _trusted(config: Any, repository: Path) -> tuple[str | None, list[str]]:
    """What the run trusts: the digest of the docket.toml it read, and the paths no candidate changes unapproved."""
    from ..adapters.world.files.config_file import find_config, trusted_configuration
    from ..adapters.world.files.paths import main_worktree

    return trusted_configuration(find_config(Path.cwd()), config, main_worktree(repository) or repository)


def _checked_out_target(repository: Path) -> str:
    """No --target and no [run] target: the branch checked out in the main checkout, said on stderr."""
    from ..adapters.world.files.paths import checked_out_branch, main_worktree
    from ..domain.kernel.errors import BadInput
    from .output import info, shown

    branch = checked_out_branch(repository)
    if branch is None:
        raise BadInput(Code.NO_TARGET, "name the target branch with --target BRANCH (or set [run] target in "
                                    "docket.toml): the main checkout has no branch checked out")
    info(f"target {shown(branch)} (the branch checked out in {shown(str(main_worktree(repository)))})")
    return branch


def _check_resume(ctx: Context, run_id: str, config: Any) -> None:
    """A run to resume: planned (or its planning finished now from the options), its options the same."""
    from ..adapters.service_layer.go.start import check_resumed_options, check_resumed_tasks
    from ..adapters.service_layer.use_cases.runs import load_run
    from ..domain.kernel.errors import Refused

    a = ctx.args
    run = load_run(ctx.ledger, run_id)
    if run.plan is None:
        from ..adapters.service_layer.go.delivery import export_key
        from ..adapters.service_layer.go.settings import agent_named
        from ..adapters.service_layer.go.start import plan_run

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


# --- supervising a run to its end ------------------------------------------------------------------------------------


def _supervise_to_end(ctx: Context, config: Any, run_id: str, *, parallel: int | None, key: str | None,
                      show: bool = True, interrupted: Any = None) -> int:
    import signal
    import threading

    from ..adapters.service_layer.go.drive import drive_run
    from ..adapters.service_layer.go.delivery import choose_signer
    from ..adapters.service_layer.go.hooks import RunHooks
    from ..adapters.service_layer.go.recovery import end_gone_supervisions, finish_opening
    from ..adapters.service_layer.go.settings import planned_agent, settings_from_config
    from ..adapters.service_layer.go.summary import run_summary
    from ..adapters.service_layer.use_cases.runs import load_run
    from .output import warn

    run = load_run(ctx.ledger, run_id)
    signer = choose_signer(run, key)  # a key that cannot be used fails before any work
    driver = _driver(ctx)
    if run.status == "opening":  # killed before its base was pinned: pin it now
        run = finish_opening(driver, run)
    assert run.plan is not None
    agent = planned_agent(config, run.plan.agent)
    _require_workspaces(ctx.require_repository())
    settings = settings_from_config(config, agent, repository=ctx.require_repository(), ledger_path=ctx.paths.ledger)
    interrupted = interrupted if interrupted is not None else threading.Event()
    previous = {sig: signal.signal(sig, _on_signal(run_id, interrupted)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:  # held until the summary is out: a Ctrl-C while the run is stopped is heard, never a traceback
        view = _view(ctx, run_id)
        hooks = RunHooks(driver, config.hooks, settings, run_id, warn=warn)
        end_gone_supervisions(driver, run_id)  # first: a crashed supervisor's downtime since its last sign: unbilled
        try:
            if run.status in ("active", "paused"):
                drive_run(driver, settings, run_id, interrupted=interrupted, signer=signer, hooks=hooks,
                          parallel=parallel, tick=view.update, standing_by=_standing_by)
        finally:
            hooks.fire(final=True)
            driver.update_views()  # the hooks' last records too
            view.update(final=True)  # the run's last events (integration, receipt) before the summary
            view.close()
        code = _summarise(ctx, run_summary(driver, run_id), interrupted=interrupted.is_set(), show=show)
    finally:
        from ..adapters.world.processes.lifecycle import hurry_stops

        for sig, handler in previous.items():
            signal.signal(sig, handler)
        hurry_stops(False)
    if interrupted.is_set() and load_run(ctx.ledger, run_id).status in ("active", "paused"):
        from .output import info, shown

        info(f"run {shown(run_id)} stopped here; go on with: docket go --resume {shown(run_id)}")
    return code


def _require_workspaces(repository: Path) -> None:
    """Refused before any work when workspaces cannot be made for this repository (a path git cannot borrow from)."""
    from ..adapters.world.git.own_repositories import require_borrowable

    require_borrowable(repository)


def _on_signal(run_id: str, interrupted: Any) -> Any:
    """SIGINT or SIGTERM to docket go: the first stops the run's agents and checks (TERM to their groups, KILL
    after a grace) and records it; another one kills what is left of them at once. Each says so on stderr."""
    import os

    from ..adapters.world.processes.lifecycle import hurry_stops
    from .output import shown

    first = (f"docket: stopping run {shown(run_id)}: its agents and checks are stopped and recorded (Ctrl-C again "
             "to kill them at once)\n").encode("utf-8", "replace")
    again = (f"docket: interrupted again: killing what is left of run {shown(run_id)}'s agents and checks at "
             "once\n").encode("utf-8", "replace")

    def handler(*_: object) -> None:
        if not interrupted.is_set():
            interrupted.set()
            line = first
        else:
            hurry_stops()
            line = again
        try:  # a plain write: the handler may interrupt a write to sys.stderr, which must not be re-entered
            os.write(2, line)
        except OSError:
            pass

    return handler


def _unfinished_runs(ctx: Context) -> list[str]:
    from ..projections import runs

    return [row["run_id"] for row in runs.list_runs(ctx.views(writable=True).conn)
            if row["status"] in ("active", "paused") and row.get("plan")]


def _wait_for_runs(interrupted: Any, seconds: float = 2.0) -> bool:
    """--follow between runs: wait a little for new ones; True once SIGINT or SIGTERM came meanwhile."""
    import signal

    previous = {sig: signal.signal(sig, lambda *_: interrupted.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        interrupted.wait(seconds)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return interrupted.is_set()


def _standing_by(why: str) -> None:
    from .output import info, shown

    info(f"standing by: {shown(why)}")


def _view(ctx: Context, run_id: str) -> Any:
    if ctx.json:  # stdout carries exactly one JSON document: the summary
        return _NoView()
    try:
        from .live import LiveView
    except ImportError:  # the live view is optional for the loop
        return _NoView()
    return LiveView(ctx, run_id)


class _NoView:
    def update(self, *, final: bool = False) -> None:
        pass

    def close(self) -> None:
        pass


def _summarise(ctx: Context, doc: dict[str, Any], *, interrupted: bool, show: bool = True) -> int:
    """Print the run's summary (see adapters/service_layer/go/summary.py) and what it came to; go's exit code."""
    from ..domain.reports.outcome import CLOSED_STATUSES, run_outcome
    from .output import emit, shown
    from .status import base_check_lines, outcome_line, spend_words

    run_id = doc["run_id"]
    said = doc["run_outcome"]  # what the run came to, in the words every surface uses (domain/reports/outcome.py)
    if interrupted and doc["status"] not in CLOSED_STATUSES:  # stopped here, whatever it waited for before
        said = run_outcome(doc["status"], said["delivered"], said["tasks"], driven=False).document()
        doc["run_outcome"] = said
    outcome = GO_OUTCOMES[said["state"]]  # the exit code's class, kept in the summary's "outcome"
    doc["outcome"] = outcome
    lines = [f"run {shown(run_id)}: {outcome_line(said)} ({doc['status']})"]
    if doc["limited_by"]:
        lines.append(f"  stopped at its {'time budget' if doc['limited_by'] == 'time' else 'max ' + doc['limited_by']}")
    if doc["spend"]["reports"] or doc["max_cost_micro_usd"] or doc["max_tokens"]:
        lines.append("  spend: " + spend_words(doc["spend"], doc["max_cost_micro_usd"], doc["max_tokens"]))
    for row in doc["tasks"]:
        checks = ", ".join(f"{name} {result}" for name, result in sorted(row["checks"].items())) or "no checks"
        candidate = row["candidate"][:12] if row["candidate"] else "-"
        why = f" [{row['code']}]" if row["code"] else ""
        lines.append(f"  {shown(row['task'])}: {row['result']}{why}, {row['cycles']} cycle(s), candidate {candidate}, "
                     f"{checks}")
        if row.get("protected_changes"):
            tested = ", ".join(f"{name} {result}" for name, result in sorted(row["base_tests"].items()))
            lines.append("    changes protected paths: " + ", ".join(shown(p) for p in row["protected_changes"][:10])
                         + (", ..." if len(row["protected_changes"]) > 10 else "")
                         + (f"; with the base's tests: {tested}" if tested else ""))
        if row.get("config_change"):
            change = row["config_change"]
            paths = ", ".join(shown(p) for p in change["paths"][:10]) + (", ..." if len(change["paths"]) > 10 else "")
            lines.append(f"    changes what the run trusts: {paths}; "
                         + ("approved by a person" if change["approved"] else "not approved by a person, so not "
                            f"delivered ('docket inbox'; 'docket approve {shown(run_id)} --task "
                            f"{shown(row['task_id'])} --by NAME')"))
        for dropped in row["conflicts"]:
            what = "conflicted with the integrated head" if dropped["status"] == "conflicted" else (
                "failed its checks merged with the integrated head")
            paths = f" on {', '.join(shown(p) for p in dropped['paths'][:10])}" if dropped["paths"] else ""
            lines.append(f"    step {dropped['step']} {what}{paths} ({shown(dropped['code'] or '')}): dropped"
                         + ("; delivered after repair" if row["result"] == "delivered" else ""))
    for overlap in doc["overlaps"]:
        lines.append(f"  warning: {shown(overlap['first_task'])} and {shown(overlap['second_task'])} change the same "
                     f"paths: {', '.join(shown(p) for p in overlap['paths'][:10])}")
    for moved in doc["moved_by_others"]:
        commits = ", ".join(c[:12] for c in moved["foreign_commits"][:10])
        more = moved["foreign_count"] - min(len(moved["foreign_commits"]), 10)
        lines.append(f"  warning: {shown(doc['target'])} was moved by someone else "
                     + ("before docket integrated" if moved["seen"] == "queue-opened" else "after docket moved it")
                     + f": {moved['foreign_count']} commit(s) docket did not make"
                     + (f" ({commits}{f' and {more} more' if more > 0 else ''})" if commits else "")
                     + ("" if moved["keeps_expected"] else f"; {moved['expected_commit'][:12]} is no longer on it")
                     + ("; integrated on top of them" if moved["seen"] == "queue-opened" or moved.get("requeued")
                        else "; nothing moved"))
    for again in doc.get("requeued", []):
        if again["moved_by"]:  # someone else's move is said above
            lines.append(f"  {shown(doc['target'])} was moved by run(s) {', '.join(shown(r) for r in again['moved_by'])}"
                         f" meanwhile: the work not delivered yet was merged again onto {again['onto'][:12]}, checked "
                         "again and delivered from there")
    if doc["unsandboxed"]:
        ran = ", ".join(f"{shown(u['worker'])} generation {u['generation']}" for u in doc["unsandboxed"][:10])
        message = (f"{len(doc['unsandboxed'])} worker generation(s) ran unsandboxed, with everything your user may "
                   f"do (sandbox = \"off\"): {ran}")
        lines.append(f"  warning: {message}")
        from .output import warn

        warn("unsandboxed", message)
    for warning in doc["warnings"]:
        lines.append(f"  warning: {warning['message']}")
        from .output import warn

        warn(warning["code"], warning["message"])
    for refused in doc.get("egress_refused", []):
        hosts = ", ".join(f"{shown(r['host'])}:{r['port']} ({r['count']})" for r in refused["refused"][:5])
        lines.append(f"  egress refused: worker {shown(refused['worker'])} generation {refused['generation']}, "
                     f"{refused['total']} connection(s), to {hosts}"
                     + (f" and {len(refused['refused']) - 5} more" if len(refused["refused"]) > 5 else ""))
    lines += base_check_lines([{"check": name, "status": b["result"], "code": b["code"]}
                               for name, b in sorted(doc["base_checks"].items())])
    if doc["target_commit"]:
        lines.append(f"  {shown(doc['target'])} -> {doc['target_commit']}"
                     + ("" if doc["integration"] == "completed" else f" (integration {doc['integration']})"))
    elif doc["integration"]:
        lines.append(f"  integration {doc['integration']}; {shown(doc['target'])} not moved")
    moved = doc.get("receipt_moved_by_others")
    if moved and moved["moved"] and not doc["moved_by_others"]:  # the ledger's records above already said it
        listed = ", ".join(c[:12] for c in moved["commits"][:10]) or "-"
        lines.append(f"  warning: {shown(doc['target'])} moved during the run by commits docket did not make: "
                     f"{listed}" + ("" if moved["base_reached"] else " (the run's base is not on its line)"))
    if doc["receipt"]["path"]:
        lines.append(f"  receipt: {shown(doc['receipt']['path'])}")
    if outcome == "waiting":
        lines.append(f"  waiting for you ({doc['waiting']['code']}): {shown(doc['waiting']['message'])}")
    if show:
        emit(ctx.json, doc, "\n".join(lines))
    return GO_EXIT[outcome]


# --- docket supervise ----------------------------------------------------------------------------------------------


def supervise(ctx: Context) -> int:
    import threading

    from ..adapters.service_layer.go.recovery import recover
    from ..adapters.service_layer.use_cases.runs import load_run
    from .output import emit, finish_despite_output, shown

    finish_despite_output()  # as docket go: the runs are driven to their ends whatever becomes of the output
    if ctx.args.once and ctx.args.follow:
        from .parsing import UsageError

        raise UsageError("--once recovers and returns; --follow never returns: choose one")
    unfinished = _unfinished_runs(ctx)
    config = _config() if (unfinished or ctx.args.follow) and not ctx.args.once else None
    _watch_ledger(ctx)
    _warn_clock_skew(ctx)
    documents = []
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
