"""docket go's supervision of a run to its end: signals, the live view, waiting, and the closing summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..console.context import Context

if TYPE_CHECKING:
    from ...adapters.service_layer.go.session import RunDriver
    from ...domain.config import Config


GO_EXIT = {"delivered": 0, "failed": 6, "stopped": 7, "waiting": 8}
# each outcome of domain/reports/outcome.py as the summary's "outcome" (GO_EXIT's class): a run closed short of delivering
# every task failed; an open run docket go let go of is stopped, or waits for you
GO_OUTCOMES = {"delivered": "delivered", "partly-delivered": "failed", "nothing-delivered": "failed",
               "stopped": "stopped", "waiting-for-you": "waiting", "running": "stopped"}


def _driver(ctx: Context) -> RunDriver:
    """The service layer's hold on this command's ledger, reader and views."""
    from ...adapters.service_layer.go.session import RunDriver

    return RunDriver(ctx.ledger, ctx.clock, ctx.effector, ctx.paths.ledger, ctx.lock_timeout,
                     reader=lambda: ctx.ledger_reader, views=ctx.views, update_views=ctx.update_views)


def _supervise_to_end(ctx: Context, config: Config, run_id: str, *, parallel: int | None, key: str | None,
                      show: bool = True, interrupted: Any = None, checks: int | None = None) -> int:
    import signal
    import threading

    from ...adapters.service_layer.go.drive import drive_run
    from ...adapters.service_layer.go.delivery import choose_signer
    from ...adapters.service_layer.go.hooks import RunHooks
    from ...adapters.service_layer.go.recovery import end_gone_supervisions, finish_opening
    from ...adapters.service_layer.go.settings import planned_agent, settings_from_config
    from ...adapters.service_layer.go.summary import run_summary
    from ...adapters.service_layer.use_cases.checks import checks_pool
    from ...adapters.service_layer.use_cases.runs import load_run
    from ..console.output import warn

    run = load_run(ctx.ledger, run_id)
    signer = choose_signer(run, key)  # a key that cannot be used fails before any work
    driver = _driver(ctx)
    if run.status == "opening":  # killed before its base was pinned: pin it now
        run = finish_opening(driver, run)
    assert run.plan is not None
    agent = planned_agent(config, run.plan.agent)
    _require_workspaces(ctx.require_repository())
    settings = settings_from_config(config, agent, repository=ctx.require_repository(), ledger_path=ctx.paths.ledger,
                                    checks=checks)
    interrupted = interrupted if interrupted is not None else threading.Event()
    previous = {sig: signal.signal(sig, _on_signal(run_id, interrupted)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:  # held until the summary is out: a Ctrl-C while the run is stopped is heard, never a traceback
        view = _view(ctx, run_id)
        hooks = RunHooks(driver, config.hooks, settings, run_id, warn=warn)
        end_gone_supervisions(driver, run_id)  # first: a crashed supervisor's downtime since its last sign: unbilled
        try:
            if run.status in ("active", "paused"):
                with checks_pool(run_id, settings.check_slots):  # the run's checks share these slots, agents apart
                    drive_run(driver, settings, run_id, interrupted=interrupted, signer=signer, hooks=hooks,
                              parallel=parallel, tick=view.update, standing_by=_standing_by)
        finally:
            hooks.fire(final=True)
            driver.update_views()  # the hooks' last records too
            view.update(final=True)  # the run's last events (integration, receipt) before the summary
            view.close()
        code = _summarise(ctx, run_summary(driver, run_id), interrupted=interrupted.is_set(), show=show)
    finally:
        from ...adapters.world.processes.lifecycle import hurry_stops

        for sig, handler in previous.items():
            signal.signal(sig, handler)
        hurry_stops(False)
    if interrupted.is_set() and load_run(ctx.ledger, run_id).status in ("active", "paused"):
        from ..console.output import info, shown

        info(f"run {shown(run_id)} stopped here; go on with: docket go --resume {shown(run_id)}")
    return code


def _require_workspaces(repository: Path) -> None:
    """Refused before any work when workspaces cannot be made for this repository (a path git cannot borrow from)."""
    from ...adapters.world.git.own_repositories import require_borrowable

    require_borrowable(repository)


def _on_signal(run_id: str, interrupted: Any) -> Any:
    """SIGINT or SIGTERM to docket go: the first stops the run's agents and checks (TERM to their groups, KILL
    after a grace) and records it; another one kills what is left of them at once. Each says so on stderr."""
    import os

    from ...adapters.world.processes.lifecycle import hurry_stops
    from ..console.output import shown

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
    from ...projections import runs

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
    from ..console.output import info, shown

    info(f"standing by: {shown(why)}")


def _view(ctx: Context, run_id: str) -> Any:
    if ctx.json:  # stdout carries exactly one JSON document: the summary
        return _NoView()
    try:
        from ..console.live import LiveView
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
    from ...domain.reports.outcome import CLOSED_STATUSES, run_outcome
    from ..console.output import emit, shown
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
        lines.append(f"  warning: {shown(overlap['first_task'])} and {shown(overlap['second_task'])} "
                     + _overlap_words(overlap))
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
        from ..console.output import warn

        warn("unsandboxed", message)
    for warning in doc["warnings"]:
        lines.append(f"  warning: {warning['message']}")
        from ..console.output import warn

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


def _overlap_words(overlap: dict[str, Any]) -> str:
    """What an overlap warning says of its paths: the same lines where they were compared by lines (whole_files:
    those that could not be, changed by both as whole files), the same paths in a warning from before that."""
    from ..console.output import shown

    whole = overlap.get("whole_files")
    if whole is None:
        return f"change the same paths: {', '.join(shown(p) for p in overlap['paths'][:10])}"
    by_lines = [p for p in overlap["paths"] if p not in whole]
    parts = ([f"the same lines of {', '.join(shown(p) for p in by_lines[:10])}"] if by_lines else []) + (
        [f"{', '.join(shown(p) for p in whole[:10])} as whole files (binary or not comparable by lines)"]
        if whole else [])
    return "change " + " and ".join(parts)
