"""docket's command line: noun-verb commands, --json everywhere, one-line errors.

Exit codes: 0 ok, 1 verification failed, 2 usage or bad input, 3 conflict or
refused by an invariant, 4 effect outcome unknown, 5 not found, 6 the work
failed, 7 docket stopped the work, 8 a run waits for you, 9 docket's output
could not be written (output-failed), 70 internal error (a bug: rerun with
--debug for the traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import __version__
from .console.output import emit, emit_error
from .console.parsing import Parser, UsageError, command, common_options
from ..domain.kernel.codes import Code

if TYPE_CHECKING:
    from ..domain.kernel.errors import DocketError

__all__ = ["COMMANDS", "build_parser", "main"]

EXIT_INTERNAL = 70
Nouns = Any  # argparse's subparsers action
Common = argparse.ArgumentParser

# Every top-level command, in the order --help lists them: the cli module that declares it and its declaring
# function, called as declare(nouns, common). The module is imported when its command is declared, not before: a
# command's run builds only its own parser, so it imports only its own module (see parse_args). Importing by name
# happens in _declare alone, and tests/unit/test_cli_shape.py resolves every entry.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("audit.ledger", "add_init"),
    "status": ("supervise.status", "register"),
    "go": ("supervise.go", "register"),
    "supervise": ("supervise.go", "register_supervise"),
    "log": ("supervise.log_command", "register"),
    "watch": ("supervise.watch", "register"),
    "verify": ("audit.ledger", "add_verify"),
    "replay": ("audit.ledger", "add_replay"),
    "schema": ("audit.ledger", "add_schema"),
    "ledger": ("audit.ledger", "add_ledger"),
    "run": ("steps.run", "register"),
    "task": ("steps.task", "register"),
    "worker": ("steps.worker", "register"),
    "candidate": ("steps.candidate", "register"),
    "check": ("steps.check", "register"),
    "handoff": ("supervise.handoff", "register"),
    "approve": ("supervise.approve", "register"),
    "inbox": ("supervise.inbox", "register"),
    "answer": ("supervise.inbox", "register_answer"),
    "request": ("supervise.request", "register"),
    "mcp": ("supervise.mcp", "register"),
    "serve": ("web.serve", "register"),
    "integrate": ("steps.integrate", "register"),
    "seal": ("audit.receipt", "add_seal"),
    "export": ("audit.receipt", "add_export"),
    "verify-receipt": ("audit.receipt", "add_verify_receipt"),
    "prove-consistency": ("audit.proofs", "add_prove_consistency"),
    "worktree": ("steps.worktree", "register"),
    "lease": ("steps.lease", "register"),
    "reconcile": ("audit.reconcile", "register"),
    "gc": ("audit.gc", "register"),
    "config": ("steps.config", "register"),
    "key": ("audit.key", "register"),
    "completion": ("completion", "add_completion"),
}


def _declare(name: str, nouns: Nouns, common: Common) -> None:
    module, function = COMMANDS[name]
    declare = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    if name == "completion":
        declare(nouns, common, build_parser)  # passed down: the completion module never imports this one
    else:
        declare(nouns, common)


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
  6    the work failed: an agent or a check exited non-zero or by a signal, a setup command failed
  7    docket stopped the work: a timeout, an idle timeout, the budget, or 'docket worker stop'
  8    docket go: the run waits for you (the summary says what to do, then 'docket go --resume RUN')
  9    docket's output could not be written (output-failed: stdout closed or full; the work is in the ledger)
  70   a bug in docket (rerun with --debug for the traceback)
  130  interrupted

environment:
  DOCKET_LEDGER        the ledger file, as --ledger
  DOCKET_LOCK_TIMEOUT  seconds to wait for the ledger's write lock (default 60)
  DOCKET_NOW           pin the clock to an ISO-8601 time; honoured only with DOCKET_TESTING=1 (tests, demos)
  DOCKET_DATABASE_URL  postgresql://user@host:port/database: the ledger is that PostgreSQL database (several
                       machines share it); views stay a file on each machine. Or docket.toml's [ledger] url
  DOCKET_HOST          this machine's host id in process identities (default: the hostname); another host's
                       processes are never looked at, so its leases are reclaimed only once they expire
  DOCKET_FAULT         SIGKILL the process at a named crash point (crash tests)"""


def build_parser(only: str | None = None) -> Parser:
    """The whole command line; with only, the root and that one command (all one run of it needs)."""
    common = common_options()
    parser = Parser(
        prog="docket",
        description="docket: a tamper-evident ledger and supervisor for coding-agent runs.",
        epilog=_ROOT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="store_true", dest="show_version", default=argparse.SUPPRESS,
                        help="print docket's version (with --json: {\"version\": ...}) and exit")
    nouns = parser.add_subparsers(dest="noun", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        if only is None or name == only:
            _declare(name, nouns, common)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse with only the named command's parser when that is safe, else (help, errors, no command) with all.

    Words after ``--`` are a command for docket to run (``docket worker launch RUN
    --task T -- COMMAND ...``), handed over untouched as ``args.command``: argparse
    does not keep ``--`` apart inside subcommands.
    """
    argv = list(argv)
    command = None
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]
    args = _parse(argv)
    if command is not None:
        if not hasattr(args, "command"):
            raise UsageError("this command takes no command after '--' (see its --help)")
        args.command = command
    return args


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    word = _command_word(argv)
    if word in COMMANDS and not {"-h", "--help"} & set(argv):
        try:
            return build_parser(only=word).parse_args(argv)
        except UsageError:
            pass  # the whole parser gives the error, in its own words
    return build_parser().parse_args(argv)


def _command_word(argv: Sequence[str]) -> str | None:
    """The first word that is not an option, nor the value of the one root option that takes a value."""
    words = iter(argv)
    for word in words:
        if word == "--ledger":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _require_unicode(argv: Sequence[str]) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates, which no ledger field can hold."""
    from ..domain.kernel.errors import BadInput

    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
            raise BadInput(Code.BAD_ENCODING, f"argument {shown[:60]!r} is not valid UTF-8") from None


def main(argv: Sequence[str] | None = None) -> int:
    from .. import pydantic_plugins
    from .console.output import guarded_output

    # the command's models are validated by pydantic alone (a process importing docket as a library keeps its own)
    pydantic_plugins.install()
    argv = list(sys.argv[1:] if argv is None else argv)
    options = argv[:argv.index("--")] if "--" in argv else argv  # what follows -- is the worker's, not docket's
    as_json = "--json" in options
    # stdout and stderr are the user's terminal or pipe: what they cannot hold or take is never a bug in docket
    with guarded_output() as output:
        return output.settled(_main(argv, as_json=as_json, debug="--debug" in options), as_json)


def _main(argv: list[str], *, as_json: bool, debug: bool) -> int:
    from ..domain.kernel.errors import DocketError, OutputFailed

    try:
        _require_unicode(argv)
        args = parse_args(argv)
        if getattr(args, "show_version", False):
            emit(as_json, {"version": __version__}, f"docket {__version__}")
            return 0
        if not getattr(args, "handler", None):
            raise UsageError("a command is needed (see 'docket --help')")
        if "DOCKET_HOST" in os.environ:  # refused before anything is recorded under it
            from ..adapters.world.processes.host import host_id

            host_id()
        from ..adapters.world.ledger.database_outage import DEFAULT_WAIT_SECONDS
        from ..adapters.world.ledger.ledger_rows import DEFAULT_LOCK_TIMEOUT
        from .console.context import Context, seconds_setting

        # refused before the command starts, not when (deep in it, maybe never) it first waits
        seconds_setting("DOCKET_LOCK_TIMEOUT", 1, DEFAULT_LOCK_TIMEOUT)
        seconds_setting("DOCKET_DATABASE_WAIT", 0, DEFAULT_WAIT_SECONDS)
        ctx = Context(args)
        try:
            return args.handler(ctx) or 0
        finally:
            ctx.close()
    except UsageError as e:
        emit_error("usage", str(e), as_json)
        return 2
    except OutputFailed as e:
        if e.reader_gone:  # `docket log | head`: its reader is done
            return 0
        emit_error(e.code, e.message, as_json)
        return e.exit_code
    except DocketError as e:
        _print_traceback_if(debug)
        e = _told_as_ledger_failure(e)
        emit_error(e.code, _with_hint(e), as_json)
        return e.exit_code
    except KeyboardInterrupt:
        emit_error("interrupted", "stopped by the user", as_json)
        return 130
    except BrokenPipeError if _stdout_gone() else ():  # `docket log | head`: its reader is done
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001  (a broken pipe of docket's own, a child's gate, is a failure like any other)
        _print_traceback_if(debug)
        code, message, exit_code = _describe(e)
        emit_error(code, message, as_json)
        return exit_code


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll says POLLERR on its write end then)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _print_traceback_if(debug: bool) -> None:
    """--debug: the traceback first; the one-line error and its exit code still follow."""
    if debug:
        import traceback

        traceback.print_exc()


def _told_as_ledger_failure(e: DocketError) -> DocketError:
    """A database failure that is a tampered ledger file (text in it that is not UTF-8) fails verification."""
    from ..domain.kernel.errors import StorageFailed

    if not isinstance(e, StorageFailed):
        return e
    from ..adapters.world.ledger.storage_errors import storage_failure

    return storage_failure(e) or e


def _with_hint(e: DocketError) -> str:
    """The message; a database's failure says where its detail is."""
    from ..domain.kernel.errors import StorageFailed

    return f"{e.message} (rerun with --debug for the traceback)" if isinstance(e, StorageFailed) else e.message


def _describe(e: Exception) -> tuple[str, str, int]:
    """Known failures of the world get their own code; anything else is a bug."""
    from ..adapters.world.ledger.storage_errors import storage_failure

    name = type(e).__name__
    if name == "ValidationError" and type(e).__module__.startswith("pydantic"):
        return _validation_code(e), _validation_message(e), 2
    if name == "ChainBroken":
        return "chain-broken", str(e), 1
    if (failed := storage_failure(e)) is not None:
        return failed.code, _with_hint(failed), failed.exit_code
    if isinstance(e, OSError):
        return "os-error", str(e), 2
    if (missing := _missing_extra(e)) is not None:
        return missing
    return "internal", f"{name}: {e} (a bug in docket; rerun with --debug for the traceback)", EXIT_INTERNAL


# The modules an optional extra of pyproject.toml brings, and that extra: a machine without it has a missing install,
# not a bug (the PostgreSQL ledger's driver and pool, imported only once DOCKET_DATABASE_URL names one).
_EXTRAS = {"psycopg": "postgres", "psycopg_pool": "postgres", "psycopg_binary": "postgres"}


def _missing_extra(e: Exception) -> tuple[str, str, int] | None:
    """missing-dependency (exit 2) for a module of an optional extra that is not installed, naming what to install."""

    if not isinstance(e, ImportError) or (extra := _EXTRAS.get((e.name or "").split(".")[0])) is None:
        return None
    return (Code.MISSING_DEPENDENCY, f"the ledger is a PostgreSQL database (DOCKET_DATABASE_URL, or docket.toml's "
                                     f"[ledger] url) but its driver is not installed ({e}): pip install "
                                     f"'docket[{extra}]'", 2)


_ID_RULE = "must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"


_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # domain/events/base.py's Id


def _is_id_error(error: dict[str, Any]) -> bool:
    return error.get("type") == "string_pattern_mismatch" and (error.get("ctx") or {}).get("pattern") == _ID_PATTERN


def _validation_code(e: Exception) -> str:
    """bad-id for an id the events refuse, too-long for text over its bound, invalid-input for anything else."""
    errors = e.errors()  # type: ignore[attr-defined]
    if errors and all(_is_id_error(error) for error in errors):
        return "bad-id"
    if errors and all(error.get("type") == "string_too_long" for error in errors):
        return "too-long"
    return "invalid-input"


def _validation_message(e: Exception) -> str:
    """A pydantic ValidationError (an id, text or resource the events refuse) as one line naming each field, in
    words a user can act on."""
    problems = []
    for error in e.errors():  # type: ignore[attr-defined]
        field = ".".join(str(part) for part in error.get("loc", ())) or "value"
        value = error.get("input")
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        kind, limits = error.get("type"), error.get("ctx") or {}
        if _is_id_error(error):
            problems.append(f"{field.replace('_', ' ')} {shown} {_ID_RULE}")
        elif kind == "string_too_long":
            problems.append(f"{field} is {len(value) if isinstance(value, str) else '?'} characters; at most "
                            f"{limits.get('max_length')}")
        elif kind == "string_too_short":
            problems.append(f"{field} must not be empty")
        elif kind == "string_pattern_mismatch":
            problems.append(f"{field} {shown} holds characters it may not (control characters, spaces or NUL)")
        else:
            problems.append(f"{field} {shown}: {error.get('msg', 'is not valid')}")
    return "; ".join(problems) or str(e)
