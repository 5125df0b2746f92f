"""docket's command line: noun-verb commands, --json everywhere, one-line errors.

Exit codes: 0 ok, 1 verification failed, 2 usage or bad input, 3 conflict or
refused by an invariant, 4 effect outcome unknown, 5 not found, 70 internal
error (a bug: rerun with --debug for the traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from . import __version__
from .output import emit, emit_error

__all__ = ["build_parser", "main"]

EXIT_INTERNAL = 70


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


RESOURCE_HELP = (
    "what is leased: a path inside the repository (worktrees/a) or another name (task:t1). A relative path is "
    "relative to the repository root, not the working directory, and every spelling of one place (./wt/a, wt//a, "
    "wt/a/, <root>/wt/a) is the one name wt/a. Refused: a path outside the repository, the root itself, control "
    "and bidi characters"
)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print exactly one JSON document on stdout")
    common.add_argument("--ledger", metavar="PATH", default=argparse.SUPPRESS,
                        help="ledger file (default: $DOCKET_LEDGER, else <git common dir>/docket/ledger.sqlite)")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show a traceback on errors")
    return common


def _command(group, name: str, handler: str, help: str, example: str):  # noqa: ANN001, ANN202, A002
    parser = group.add_parser(
        name, parents=[_common()], help=help, description=help,
        epilog=f"example:\n  {example}", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def _group(nouns, name: str, help: str, example: str):  # noqa: ANN001, ANN202, A002
    """A noun whose verbs are commands: its --help shows an example too."""
    parser = nouns.add_parser(name, help=help, description=help, epilog=f"example:\n  {example}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser.add_subparsers(dest="verb", metavar="VERB", required=True, parser_class=_Parser)


_ROOT_EPILOG = """\
example:
  docket init && docket run open --target main --goal 'fix the flaky test'

exit codes:
  0    ok
  1    verification failed (a broken chain, an unexpected schema, drifted projections)
  2    usage or bad input
  3    conflict, or refused by an invariant (lease-held, stale-generation, run-closed ...)
  4    an effect's outcome is unknown (nothing is redone blindly; 'docket replay --apply' observes again)
  5    not found (no-ledger, run-not-found, unknown-branch ...)
  70   a bug in docket (rerun with --debug for the traceback)
  130  interrupted

environment:
  DOCKET_LEDGER        the ledger file, as --ledger
  DOCKET_LOCK_TIMEOUT  seconds to wait for the ledger's write lock (default 60)
  DOCKET_NOW           pin the clock to an ISO-8601 time; honoured only with DOCKET_TESTING=1 (tests, demos)
  DOCKET_FAULT         SIGKILL the process at a named crash point (crash tests)"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="docket",
        description="docket: a tamper-evident ledger and supervisor for coding-agent runs.",
        epilog=_ROOT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common()],
    )
    parser.add_argument("--version", action="store_true", dest="show_version", default=argparse.SUPPRESS,
                        help="print docket's version (with --json: {\"version\": ...}) and exit")
    nouns = parser.add_subparsers(dest="noun", metavar="COMMAND", parser_class=_Parser)

    L = "docket.cli.ledger_commands:"
    R = "docket.cli.run_commands:"

    _command(nouns, "init", L + "init", "create the ledger (idempotent)", "docket init")

    p = _command(nouns, "status", "docket.cli.status_command:status", "show runs as the ledger knows them",
                 "docket status run-7k2m9x4q --json")
    p.add_argument("run", nargs="?", metavar="RUN", help="one run (default: every run)")
    p.add_argument("--at", metavar="POSITION|TIME", help="state as of a ledger position or an ISO-8601 time")

    p = _command(nouns, "log", L + "log", "list ledger events", "docket log --run run-7k2m9x4q --type LeaseGranted")
    p.add_argument("--run", metavar="RUN", help="only events of this run")
    p.add_argument("--type", metavar="TYPE", help="only events of this type (e.g. LeaseGranted or LeaseGranted.v1)")
    p.add_argument("--follow", action="store_true", help="keep printing new events (with --json: one per line)")

    p = _command(nouns, "verify", L + "verify", "recompute the hash chain and name the first bad position",
                 "docket verify --json > anchor.json; docket verify --anchor anchor.json")
    p.add_argument("--anchor", metavar="FILE", help="JSON with the position and digest the ledger must still hold")

    p = _command(nouns, "replay", L + "replay",
                 "verify, rebuild every projection and compare; --apply drives pending intents",
                 "docket replay --apply")
    p.add_argument("--until", metavar="POSITION", type=_position, help="stop at this position")
    p.add_argument("--apply", action="store_true", help="drive every pending intent to its outcome")

    p = _command(nouns, "schema", L + "schema", "print the JSON Schema of every event type", "docket schema --json")
    p.add_argument("--markdown", action="store_true", help="render the event catalogue as docs/events.md")

    run = _group(nouns, "run", "open and steer runs", "docket run open --target main --goal 'fix the flaky test'")
    p = _command(run, "open", R + "run_open", "open a run: pins the target branch's commit as its base",
                 "docket run open --target main --goal 'fix the flaky test' --budget 2h")
    p.add_argument("--target", required=True, metavar="BRANCH", help="target branch")
    p.add_argument("--goal", required=True, metavar="TEXT", help="what the run is for")
    p.add_argument("--budget", metavar="DURATION", help="time budget, e.g. 90m or 2h30m")
    p.add_argument("--id", metavar="RUN", help="run id (default: a new random id)")
    p.add_argument("--no-wait", action="store_true", help="record the intent and return without pinning")
    p = _command(run, "pause", R + "run_pause", "pause a run (its budget stops)", "docket run pause run-7k2m9x4q")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--reason", metavar="TEXT", help="why, for the record")
    p = _command(run, "resume", R + "run_resume", "resume a paused run", "docket run resume run-7k2m9x4q")
    p.add_argument("run", metavar="RUN", help="the run id")
    p = _command(run, "abort", R + "run_abort", "abort a run", "docket run abort run-7k2m9x4q --reason 'wrong goal'")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why, for the record")
    p = _command(run, "complete", R + "run_complete", "mark a run complete", "docket run complete run-7k2m9x4q")
    p.add_argument("run", metavar="RUN", help="the run id")

    task = _group(nouns, "task", "plan tasks", "docket task plan run-7k2m9x4q --title 'write the parser'")
    p = _command(task, "plan", R + "task_plan", "plan a task inside a run",
                 "docket task plan run-7k2m9x4q --title 'write the parser'")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--title", required=True, metavar="TEXT", help="what the task is")
    p.add_argument("--id", metavar="TASK", help="task id (default: a new random id)")

    worker = _group(nouns, "worker", "register and relaunch workers",
                    "docket worker register run-7k2m9x4q --role implementer --id w1")
    p = _command(worker, "register", R + "worker_register", "register a worker at generation 1",
                 "docket worker register run-7k2m9x4q --role implementer --task task-1")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--role", required=True, metavar="ROLE", help="e.g. implementer, reviewer, integrator")
    p.add_argument("--task", metavar="TASK", help="the task it works on (in the same run)")
    p.add_argument("--id", metavar="WORKER", help="worker id (default: a new random id)")
    p = _command(worker, "relaunch", R + "worker_relaunch", "raise a worker's generation, fencing the old one",
                 "docket worker relaunch worker-1")
    p.add_argument("worker", metavar="WORKER", help="the worker id")

    lease = _group(nouns, "lease", "grant, renew, release and expire leases",
                   "docket lease grant worktrees/w1 --worker w1 --generation 1 --ttl 10m")
    p = _command(lease, "grant", R + "lease_grant", "grant a resource to a worker generation",
                 "docket lease grant worktrees/a --worker worker-1 --generation 1 --ttl 10m")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)
    p.add_argument("--worker", required=True, metavar="WORKER", help="the worker that will hold it")
    p.add_argument("--generation", required=True, type=_position, metavar="N",
                   help="the worker's current generation (a fenced one is refused)")
    p.add_argument("--ttl", required=True, metavar="DURATION", help="how long the lease lasts from now, e.g. 10m")
    p = _command(lease, "renew", R + "lease_renew", "extend a lease",
                 "docket lease renew worktrees/a --token 12 --ttl 10m")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)
    p.add_argument("--token", required=True, type=_position, metavar="N", help="the lease's fencing token")
    p.add_argument("--ttl", required=True, metavar="DURATION", help="how long the lease lasts from now, e.g. 10m")
    p = _command(lease, "release", R + "lease_release", "give a lease back",
                 "docket lease release worktrees/a --token 12")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)
    p.add_argument("--token", required=True, type=_position, metavar="N", help="the lease's fencing token")
    p = _command(lease, "expire", R + "lease_expire", "record that a lease ran past its expiry",
                 "docket lease expire worktrees/a")
    p.add_argument("resource", metavar="RESOURCE", help=RESOURCE_HELP)

    p = _command(nouns, "completion", L + "completion", "print a shell completion script",
                 "eval \"$(docket completion bash)\"")
    p.add_argument("shell", choices=["bash", "zsh"], help="bash or zsh")
    return parser


def _position(text: str) -> int:
    from ..domain.errors import BadInput
    from ..domain.values import parse_position

    try:
        return parse_position(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(e.message) from None


def _require_unicode(argv: Sequence[str]) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates, which no ledger field can hold."""
    from ..domain.errors import BadInput

    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
            raise BadInput("bad-encoding", f"argument {shown[:60]!r} is not valid UTF-8") from None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    debug = "--debug" in argv
    from ..domain.errors import DocketError

    try:
        _require_unicode(argv)
        args = build_parser().parse_args(argv)
        if getattr(args, "show_version", False):
            emit(as_json, {"version": __version__}, f"docket {__version__}")
            return 0
        if not getattr(args, "handler", None):
            raise UsageError("a command is needed (see 'docket --help')")
        module_name, _, function_name = args.handler.partition(":")
        handler = getattr(importlib.import_module(module_name), function_name)
        from .context import Context

        ctx = Context(args)
        try:
            return handler(ctx) or 0
        finally:
            ctx.close()
    except UsageError as e:
        emit_error("usage", str(e), as_json)
        return 2
    except DocketError as e:
        _print_traceback_if(debug)
        emit_error(e.code, e.message, as_json)
        return e.exit_code
    except KeyboardInterrupt:
        emit_error("interrupted", "stopped by the user", as_json)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001
        _print_traceback_if(debug)
        code, message, exit_code = _describe(e)
        emit_error(code, message, as_json)
        return exit_code


def _print_traceback_if(debug: bool) -> None:
    """--debug: the traceback first; the one-line error and its exit code still follow."""
    if debug:
        import traceback

        traceback.print_exc()


def _describe(e: Exception) -> tuple[str, str, int]:
    """Known failures of the world get their own code; anything else is a bug."""
    import sqlite3

    name = type(e).__name__
    if name == "ValidationError" and type(e).__module__.startswith("pydantic"):
        return "invalid-input", _validation_message(e), 2
    if name == "ChainBroken":
        return "chain-broken", str(e), 1
    if isinstance(e, sqlite3.DatabaseError) or name in ("OperationalError", "DatabaseError", "InterfaceError"):
        return "database", f"{e} (rerun with --debug for the traceback)", 2
    if isinstance(e, OSError):
        return "os-error", str(e), 2
    return "internal", f"{name}: {e} (a bug in docket; rerun with --debug for the traceback)", EXIT_INTERNAL


def _validation_message(e: Exception) -> str:
    """A pydantic ValidationError (an id, text or resource the events refuse) as one line naming each field."""
    problems = []
    for error in e.errors():  # type: ignore[attr-defined]
        field = ".".join(str(part) for part in error.get("loc", ())) or "value"
        shown = repr(error.get("input"))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        problems.append(f"{field} {shown}: {error.get('msg', 'is not valid')}")
    return "; ".join(problems) or str(e)
