"""Reading a small UTF-8 file a user names on the command line (a prompt, a tasks file), with one clear error."""

from __future__ import annotations

__all__ = ["read_text"]


def read_text(name: str, *, limit: int, code: str, stdin: bool = False) -> str:
    """The text of the file ``name`` ('-' is standard input when ``stdin``); BadInput ``code`` when it cannot be
    read, is not UTF-8 or holds more than ``limit`` bytes (``prompt-too-large`` for that, when code is a prompt's)."""
    import sys

    from ..domain.errors import BadInput

    try:
        if stdin and name == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(name, "rb") as f:
                data = f.read(limit + 1)
    except OSError as e:
        raise BadInput(code, f"cannot read {name}: {e.strerror}") from None
    except ValueError:  # a NUL in the name
        raise BadInput(code, f"{name!r} is not a file name") from None
    if len(data) > limit:
        raise BadInput("prompt-too-large" if code == "bad-prompt-file" else code,
                       f"{name} holds more than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(code, f"{name} is not UTF-8 text") from None
