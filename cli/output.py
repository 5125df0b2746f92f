"""Output in one place: JSON documents, human text, one-line errors, progress."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["Progress", "emit", "emit_error"]


_emitted = False


def emit(as_json: bool, document: Any, human: str | None) -> None:
    global _emitted
    if as_json:
        _emitted = True
        sys.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2) + "\n")
    elif human:
        sys.stdout.write(human.rstrip("\n") + "\n")
    sys.stdout.flush()


def emit_error(code: str, message: str, as_json: bool) -> None:
    message = " ".join(message.split())  # always one line
    sys.stderr.write(f"docket: error: {code}: {message}\n")
    if as_json and not _emitted:  # still exactly one document on stdout
        sys.stdout.write(json.dumps({"error": {"code": code, "message": message}}, sort_keys=True) + "\n")


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
