"""Reading a small UTF-8 file a user names on the command line (a prompt, a tasks file), with one clear error."""

from __future__ import annotations

__all__ = ["read_text"]


def read_text(name: str, *, limit: int, code: str, stdin: bool = False) -> str:
    """The text of the file ``name`` ('-' is standard input when ``stdin``); BadInput ``code`` when it cannot be
    read, is not UTF-8 or holds more than ``limit`` bytes (``prompt-too-large`` for that, when code is a prompt's)."""
    import sys

    from ...domain.kernel.errors import BadInput

    too_large = BadInput("prompt-too-large" if code == "bad-prompt-file" else code,
                         f"{name} holds more than {limit} bytes")
    if stdin and name == "-":
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise too_large
    else:
        from ...adapters.world.files.files import read_named_file

        data = read_named_file(name, limit, code=code, too_large=too_large)  # a FIFO or device: refused at once
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(code, f"{name} is not UTF-8 text") from None
