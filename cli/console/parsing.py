"""What every noun module declares its commands with: one option bundle, help with an example, one-line usage errors.

Standard library only: building a command's parser must not import what its handler uses.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Parser", "UsageError", "command", "common_options", "group", "position"]

Handler = Callable[[Any], int]


class UsageError(Exception):
    pass


def terminal_width() -> int:
    """The width argparse gives its help (shutil.get_terminal_size's columns, less 2), found without shutil.

    argparse imports shutil for it whenever a parser is made or an argument added, and shutil imports the
    compression modules (zlib, bz2, lzma): a few ms of every command's start, for help that is not printed.
    """
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=terminal_width())  # type: ignore[call-arg]

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        """A command's options may come before, between or after its arguments (``docket answer ID --as NAME
        TEXT``): argparse alone fills an optional argument at the first word and leaves a later one over."""
        optional = any(a.nargs in ("?", "*") for a in self._get_positional_actions())
        if self._subparsers is not None or not optional or getattr(self, "_intermixing", False):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def common_options() -> argparse.ArgumentParser:
    """The options every command takes, built once and shared as a parent."""
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print exactly one JSON document on stdout")
    common.add_argument("--ledger", metavar="PATH", default=argparse.SUPPRESS,
                        help="ledger file (default: $DOCKET_LEDGER, else <git common dir>/docket/ledger.sqlite)")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show a traceback on errors")
    return common


def command(group: Any, name: str, handler: Handler, common: argparse.ArgumentParser, help: str,  # noqa: A002
            example: str) -> argparse.ArgumentParser:
    parser = group.add_parser(
        name, parents=[common], help=help, description=help,
        epilog=f"example:\n  {example}", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def group(nouns: Any, name: str, help: str, example: str) -> Any:  # noqa: A002
    """A noun whose verbs are commands: its --help shows an example too."""
    parser = nouns.add_parser(name, help=help, description=help, epilog=f"example:\n  {example}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser.add_subparsers(dest="verb", metavar="VERB", required=True, parser_class=Parser)


def position(text: str) -> int:
    """An argument type: a ledger position or another whole number from 1."""
    from ...domain.kernel.errors import BadInput
    from ...domain.kernel.values import parse_position

    try:
        return parse_position(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(e.message) from None
