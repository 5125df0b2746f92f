"""docket run open / pause / resume / abort / complete."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..console.context import Context
from ..console.output import emit, shown
from ..console.parsing import command, group
from ..console.recorded import recorded
from ...domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...domain.run import Run

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    run = group(nouns, "run", "open and steer runs", "docket run open --target main --goal 'fix the flaky test'")
    p = command(run, "open", run_open, common, "open a run: pins the target branch's commit as its base",
                "docket run open --target main --goal 'fix the flaky test' --budget 2h")
    p.add_argument("--target", metavar="BRANCH", help="target branch (default: docket.toml's [run] target)")
    p.add_argument("--goal", required=True, metavar="TEXT", help="what the run is for")
    p.add_argument("--budget", metavar="DURATION",
                   help="time budget, e.g. 90m or 2h30m (default: docket.toml's [run] budget, else none)")
    p.add_argument("--max-cost", metavar="USD",
                   help="stop the run once its agents reported this cost in US dollars, e.g. 2.50 (default: "
                        "docket.toml's [run] max_cost, else none)")
    p.add_argument("--max-tokens", metavar="N",
                   help="stop the run once its agents reported this many tokens, input and output together "
                        "(default: docket.toml's [run] max_tokens, else none)")
    p.add_argument("--id", metavar="RUN", help="run id (default: a new random id)")
    p.add_argument("--no-wait", action="store_true", help="record the intent and return without pinning")
    p = command(run, "pause", run_pause, common, "pause a run (its budget stops)", "docket run pause run-7k2m9x4q")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--reason", metavar="TEXT", help="why, for the record")
    p = command(run, "resume", run_resume, common, "resume a paused run", "docket run resume run-7k2m9x4q")
    p.add_argument("run", metavar="RUN", help="the run id")
    p = command(run, "abort", run_abort, common, "abort a run", "docket run abort run-7k2m9x4q --reason 'wrong goal'")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--reason", default="aborted with docket run abort", metavar="TEXT",
                   help="why, for the record (default: 'aborted with docket run abort')")
    p = command(run, "complete", run_complete, common, "mark a run complete", "docket run complete run-7k2m9x4q")
    p.add_argument("run", metavar="RUN", help="the run id")


def run_open(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.runs import open_run
    from ...adapters.world.clock import new_id
    from ...domain.kernel.errors import NotFound
    from ...domain.kernel.values import parse_cost, parse_duration, parse_tokens

    a = ctx.args
    budget_ms = None if a.budget is None else parse_duration(a.budget)
    max_cost = None if a.max_cost is None else parse_cost(a.max_cost)
    max_tokens = None if a.max_tokens is None else parse_tokens(a.max_tokens)
    repository = ctx.repository
    if repository is None:
        raise NotFound(Code.NOT_A_REPOSITORY, "run 'docket run open' inside the git repository the run targets")
    from pathlib import Path

    from ...adapters.world.files.config_file import find_config, load_config
    from ...domain.kernel.errors import BadInput

    config = load_config(find_config(Path.cwd()))  # [run] for what the command line leaves out; [git] remote
    target = a.target or config.run.target
    budget_ms = budget_ms if a.budget is not None else config.run.budget_ms
    max_cost = max_cost if a.max_cost is not None else config.run.max_cost_micro_usd
    max_tokens = max_tokens if a.max_tokens is not None else config.run.max_tokens
    if target is None:
        raise BadInput(Code.NO_TARGET, "name the target branch with --target BRANCH (or set [run] target in "
                                    "docket.toml)")
    run_id, intent_id = a.id or new_id("run"), new_id("intent")
    try:
        run = open_run(ctx.ledger, ctx.clock, run_id=run_id, intent_id=intent_id, goal=a.goal,
                       target_branch=target, budget_ms=budget_ms, repository=str(repository),
                       wait=not a.no_wait, effector=None if a.no_wait else ctx.effector,
                       remote=config.git.remote, max_cost_micro_usd=max_cost, max_tokens=max_tokens)
    finally:
        if "ledger" in vars(ctx):  # a failed or unknown pin is recorded too: the views show the run either way
            ctx.update_views()
    pending = intent_id in run.pending_intents
    doc = {"run": _run_doc(run), "intent": {"intent_id": intent_id, "pending": pending}}
    if run.base_commit:
        human = f"run {run_id} opened on {run.target_branch} at {run.base_commit[:12]}"
    else:
        human = f"run {run_id} opened; base pin pending (intent {intent_id})"
    emit(ctx.json, doc, shown(human))
    return 0


def _run_doc(run: Run) -> dict[str, Any]:
    return {"run_id": run.run_id, "status": run.status, "goal": run.goal, "target_branch": run.target_branch,
            "base_commit": run.base_commit, "budget_ms": run.budget_ms,
            "max_cost_micro_usd": run.max_cost_micro_usd, "max_tokens": run.max_tokens}


def run_pause(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.runs import pause_run

    appended = pause_run(ctx.ledger, ctx.clock, ctx.args.run, ctx.args.reason)
    return recorded(ctx, appended, f"run {ctx.args.run} paused")


def run_resume(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.runs import resume_run

    appended = resume_run(ctx.ledger, ctx.clock, ctx.args.run)
    return recorded(ctx, appended, f"run {ctx.args.run} resumed")


def run_abort(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.runs import abort_run
    from ...domain.events import IntentCancelled

    appended = abort_run(ctx.ledger, ctx.clock, ctx.args.run, ctx.args.reason)
    cancelled = [e.intent_id for _, e in appended.events if isinstance(e, IntentCancelled)]
    human = f"run {ctx.args.run} aborted" + (f"; cancelled pending intent(s) {', '.join(cancelled)}" if cancelled else "")
    return recorded(ctx, appended, human, cancelled_intents=cancelled)


def run_complete(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.runs import complete_run

    appended = complete_run(ctx.ledger, ctx.clock, ctx.args.run)
    return recorded(ctx, appended, f"run {ctx.args.run} completed")
