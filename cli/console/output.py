"""Output in one place: JSON documents, human text, one-line errors, progress."""

from __future__ import annotations

import codecs
import errno
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ...domain.kernel.names import has_unsafe_characters, is_unsafe_character

__all__ = ["ESCAPE_ERRORS", "OutputGuard", "Progress", "emit", "emit_error", "info", "shown", "streamed_document",
           "warn"]

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


# --- stdout and stderr as the user's terminal or pipe has them ---------------------------------------------------

ESCAPE_ERRORS = "docket-escape"  # the codec error handler below, registered under this name


def _escape_unencodable(error: UnicodeError) -> tuple[str, int]:
    """A character the output's encoding cannot hold (an ASCII or latin-1 terminal, a lone surrogate) as a \\uXXXX
    escape: readable in human text, and in a --json document a JSON escape of the very same character."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    escaped = []
    for char in error.object[error.start:error.end]:
        code = ord(char)
        if code > 0xFFFF:  # a JSON escape is a UTF-16 surrogate pair
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), error.end


codecs.register_error(ESCAPE_ERRORS, _escape_unencodable)


class _Guarded:
    """A stream (sys.stdout or sys.stderr) whose write failures are the user's pipe: recorded, never a crash.

    After the first failure nothing more is written (its file descriptor then reads /dev/null's sink, so what is
    still buffered, and a child's output, go nowhere instead of failing again at exit). Writes on stdout raise
    OutputFailed at that first failure unless the guard is tolerant (`docket go`: its run goes on); stderr never
    raises: a message with nowhere to go leaves the exit code to say it.
    """

    def __init__(self, stream: TextIO, name: str, guard: OutputGuard, *, raises: bool):
        self._stream = stream
        self._name = name
        self._guard = guard
        self._raises = raises
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        if self.failure is None:
            try:
                return self._stream.write(text)
            except OSError as e:
                self._failed(e)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self._stream.flush()
            except OSError as e:
                self._failed(e)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _failed(self, error: OSError) -> None:
        self.failure = error
        _silence(self._stream)
        if self._raises and not self._guard.tolerant:
            raise self._guard.failed_output() from error


def _silence(stream: TextIO) -> None:
    """Point the stream's file descriptor at /dev/null: its buffer, and whatever else holds the descriptor, drain."""
    try:
        fd = stream.fileno()
        sink = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):  # not a file (a test's capture)
        return
    try:
        os.dup2(sink, fd)
    except OSError:
        pass
    finally:
        os.close(sink)


def _stand_in(fd: int) -> TextIO:
    """A stream on fd for a process started with fd closed (`docket status >&-`): the descriptor is taken by
    /dev/null opened read-only, so that no file docket opens lands there, and writing it fails as a closed one."""
    try:
        os.fstat(fd)
    except OSError:
        taken = os.open(os.devnull, os.O_RDONLY)
        if taken != fd:
            os.dup2(taken, fd)
            os.close(taken)
    return open(fd, "w", encoding="utf-8", errors=ESCAPE_ERRORS, closefd=False)  # noqa: SIM115


class OutputGuard:
    """sys.stdout and sys.stderr while a command runs (cli/app.py main): what the encoding cannot show is escaped,
    a closed stdout or stderr is stood in for, and a failed write is recorded (on stdout, OutputFailed) instead of
    becoming a crash. uninstall() puts the streams back."""

    def __init__(self) -> None:
        self.tolerant = False
        self._saved = (sys.stdout, sys.stderr)
        stdout = sys.stdout if sys.stdout is not None else _stand_in(1)
        stderr = sys.stderr if sys.stderr is not None else _stand_in(2)
        reconfigure = getattr(stdout, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors=ESCAPE_ERRORS)
            except (OSError, ValueError):
                pass
        self.stdout = _Guarded(stdout, "stdout", self, raises=True)
        self.stderr = _Guarded(stderr, "stderr", self, raises=False)
        sys.stdout, sys.stderr = self.stdout, self.stderr

    def uninstall(self) -> None:
        sys.stdout, sys.stderr = self._saved

    @property
    def failure(self) -> OSError | None:
        return self.stdout.failure

    def failed_output(self) -> Exception:
        from ...domain.kernel.errors import OutputFailed

        error = self.stdout.failure
        reason = "it is closed" if error is not None and error.errno == errno.EBADF else \
            os.strerror(error.errno) if error is not None and error.errno else str(error)
        return OutputFailed(f"docket's output could not be written to stdout: {reason}; what the command recorded "
                            "is in the ledger ('docket status', 'docket log')",
                            reader_gone=isinstance(error, BrokenPipeError))

    def finish_despite_output(self) -> None:
        """From here on a failed stdout does not stop the command: it ends its work, then exits output-failed."""
        self.tolerant = True

    def settled(self, exit_code: int, as_json: bool) -> int:
        """The command's exit code once its output is flushed: output-failed if stdout failed and no error said
        so yet (a reader that closed its pipe ends the output quietly)."""
        from ...domain.kernel.errors import OutputFailed

        try:
            self.stdout.flush()
        except OutputFailed:
            pass  # recorded: said below
        if self.failure is None or isinstance(self.failure, BrokenPipeError) or exit_code == OutputFailed.exit_code:
            return exit_code
        failed = self.failed_output()
        assert isinstance(failed, OutputFailed)
        emit_error(failed.code, failed.message, as_json)
        return failed.exit_code


_guard: OutputGuard | None = None


def finish_despite_output() -> None:
    """For a command that must end its work whatever becomes of its output (`docket go`, `docket supervise`)."""
    if _guard is not None:
        _guard.finish_despite_output()


@contextmanager
def guarded_output() -> Iterator[OutputGuard]:
    global _guard
    outer, _guard = _guard, OutputGuard()
    try:
        yield _guard
    finally:
        _guard.uninstall()
        _guard = outer
