"""What every noun module declares its commands with: one option bundle, help with an example, one-line usage errors.

Standard library only: building a command's parser must not import what its handler uses.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["Parser", "UsageError", "command", "common_options", "group", "position"]

Handler = Callable[[Any], int]


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def common_options() -> argparse.ArgumentParser:
    """The options every command takes, built once and shared as a parent."""
    common = argparse.ArgumentParser(add_help=False)
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
    from ..domain.errors import BadInput
    from ..domain.values import parse_position

    try:
        return parse_position(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(e.message) from None
