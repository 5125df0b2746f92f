"""Output in one place: JSON documents, human text, one-line errors, progress."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..domain.names import has_unsafe_characters, is_unsafe_character

__all__ = ["Progress", "emit", "emit_error", "info", "shown", "streamed_document", "warn"]

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: object) -> str:
    """text as a terminal can show it safely: controls, bidi and invisible characters become visible escapes.

    For every user- or ledger-supplied value in human output: a goal holding a newline
    and an OSC sequence must neither forge a line nor retitle the terminal. --json
    output carries the exact strings instead.
    """
    text = str(text)
    if not has_unsafe_characters(text):
        return text
    return "".join(_escaped(char) if is_unsafe_character(char) else char for char in text)


def _escaped(char: str) -> str:
    code = ord(char)
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_emitted = False
_unfinished: Callable[[dict[str, str]], None] | None = None  # closes a document streamed piece by piece


def emit(as_json: bool, document: Any, human: str | None) -> None:
    global _emitted
    if as_json:
        _emitted = True
        sys.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2) + "\n")
    elif human:
        sys.stdout.write(human.rstrip("\n") + "\n")
    sys.stdout.flush()


@contextmanager
def streamed_document(close_with_error: Callable[[dict[str, str]], None]) -> Iterator[None]:
    """Around writing one JSON document piece by piece: if that fails, the error closes it.

    emit_error then calls close_with_error({"code": ..., "message": ...}) to end
    the open document with an "error" member, instead of starting a second one.
    """
    global _emitted, _unfinished
    _emitted, _unfinished = True, close_with_error
    yield
    _unfinished = None  # not reached when the body raised: the document stays open for emit_error


def emit_error(code: str, message: str, as_json: bool) -> None:
    global _unfinished
    message = " ".join(shown(message).split())  # one line, and nothing in it drives the terminal
    sys.stderr.write(f"docket: error: {code}: {message}\n")
    if as_json and _unfinished is not None:
        close, _unfinished = _unfinished, None
        close({"code": code, "message": message})
    elif as_json and not _emitted:  # still exactly one document on stdout
        sys.stdout.write(json.dumps({"error": {"code": code, "message": message}}, sort_keys=True) + "\n")


def warn(code: str, message: str) -> None:
    """A one-line warning on stderr: the command goes on (its exit code says what happened)."""
    message = " ".join(shown(message).split())
    sys.stderr.write(f"docket: warning: {code}: {message}\n")
    sys.stderr.flush()


class Progress:
    """A counter on stderr for long work, shown only when stderr is a terminal."""

    def __init__(self, label: str, total: int | None = None):
        self.label = label
        self.total = total
        self.enabled = sys.stderr.isatty()
        self._last = -1

    def __call__(self, done: int) -> None:
        if not self.enabled or done - self._last < 10_000 and done != self.total:
            return
        self._last = done
        of = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\r{self.label} {done}{of}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self._last >= 0:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def info(message: str) -> None:
    """A line of progress for a person, on stderr, so stdout stays the command's result."""
    sys.stderr.write(f"docket: {message}\n")
    sys.stderr.flush()
