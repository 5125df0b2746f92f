"""docket.toml on disk: found from any worktree of the repository, read safely, errors named by key and line."""

from __future__ import annotations

import bisect
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain.kernel.errors import BadInput
from .paths import find_git_common_dir, syntax_message
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ....domain.config import Config

__all__ = ["CONFIG_NAME", "MAX_CONFIG_BYTES", "approval_required", "config_path", "find_config", "key_lines",
           "load_config", "load_trusted_config", "require_trusted", "trusted_configuration", "write_default"]

CONFIG_NAME = "docket.toml"
MAX_CONFIG_BYTES = 1 << 20


def config_path(start: Path) -> Path | None:
    """Where the repository around start keeps docket.toml: the top of its main checkout.

    Every worktree shares the git common dir, and the main checkout is its parent, so
    linked worktrees find the same file. A bare repository has no checkout: None, as outside any repository.
    """
    common = find_git_common_dir(start.absolute())
    if common is None or common.name != ".git":
        return None
    return common.parent / CONFIG_NAME


def find_config(start: Path) -> Path | None:
    """The repository's docket.toml if there is one; a symlink there is refused, never followed."""
    path = config_path(start)
    if path is None or not os.path.lexists(path):
        return None
    if path.is_symlink():
        raise BadInput(Code.CONFIG_SYMLINK, f"{path} is a symlink; docket reads only a regular docket.toml in the "
                                         "repository, never one a link points to")
    return path


def load_config(path: Path | None) -> Config:
    """The configuration in path (None: the defaults); every problem is BadInput naming the line."""
    import tomllib

    from pydantic import ValidationError

    from ....domain.config import Config

    if path is None:
        return Config()
    text = _read_text(path)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(Code.BAD_CONFIG, syntax_message(str(e))) from None
    try:
        return Config.model_validate(document)
    except ValidationError as e:
        raise BadInput(Code.BAD_CONFIG, _validation_message(path, text, e)) from None


def trusted_configuration(path: Path | None, config: Config, repository: Path) -> tuple[str | None, list[str]]:
    """What a run trusts (domain/containment/trust.py): the digest of the docket.toml read (None: none), and the repository's
    trusted paths, docket.toml and the files its checks, hooks and setup commands name (a word naming a folder of
    the checkout, such as pytest's ``tests``, is the suite's input, not a script: left out)."""
    from ....domain.containment.trust import ALWAYS_TRUSTED, named_paths

    digest = None if path is None else config_sha256(path)
    named = {p for p in named_paths(config.trusted_commands()) if not (repository / p).is_dir()}
    return digest, sorted({*ALWAYS_TRUSTED, *named})


def config_sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(_read_text(path).encode("utf-8")).hexdigest()


def require_trusted(path: Path | None, config: Config) -> None:
    """Refused ``config-untrusted`` when the repository's docket.toml widens a sandbox (Config.widenings) and its user
    has not trusted this very file (adapters/world/files/user_config.py): an agent's edit never widens its own sandbox."""
    from ....domain.kernel.errors import Refused
    from .user_config import trust_file, trusts

    widening = config.widenings()
    if path is None or not widening:
        return
    digest = config_sha256(path)
    common = find_git_common_dir(path.parent.absolute())
    if common is not None and trusts(common, digest):
        return
    shown = ", ".join(widening[:6]) + (f" and {len(widening) - 6} more" if len(widening) > 6 else "")
    raise Refused(Code.CONFIG_UNTRUSTED, f"{path} widens what agents, checks or hooks may do ({shown}); docket "
                                         f"honours that only for a docket.toml you trust: read it, then run 'docket "
                                         f"config trust' (sha256 {digest[:12]}, recorded in {trust_file()})")


def load_trusted_config(start: Path) -> Config:
    """The configuration of the repository around start, for a command that launches agents, checks or hooks:
    refused (config-untrusted) when it widens a sandbox from a docket.toml its user has not trusted."""
    path = find_config(start)
    config = load_config(path)
    require_trusted(path, config)
    return config


def approval_required(start: Path) -> bool:
    """[integration] approval as the docket.toml of the repository around start sets it, read with the standard
    library only so that `docket status` stays light. No file, or one that cannot be read or parsed, says False
    here: every command that acts on the configuration loads it whole (load_config) and names the problem."""
    import tomllib

    try:
        path = find_config(start)
        table = None if path is None else tomllib.loads(_read_text(path)).get("integration")
    except (BadInput, tomllib.TOMLDecodeError):
        return False
    return isinstance(table, dict) and table.get("approval") is True


def write_default(root: Path) -> bool:
    """Create root/docket.toml with the commented default; False if anything (even a symlink) is there already."""
    from ....domain.config import DEFAULT_TOML

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(root / CONFIG_NAME, flags, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(DEFAULT_TOML)
    return True


def _read_text(path: Path) -> str:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if os.path.islink(path):
            raise BadInput(Code.CONFIG_SYMLINK, f"{path} is a symlink; docket reads only a regular docket.toml") from None
        raise BadInput(Code.CONFIG_UNREADABLE, f"{path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise BadInput(Code.CONFIG_NOT_A_FILE, f"{path} is not a regular file")
        data = file.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise BadInput(Code.CONFIG_TOO_LARGE, f"{path} is larger than {MAX_CONFIG_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise BadInput(Code.CONFIG_ENCODING, f"{CONFIG_NAME} line {line}: not valid UTF-8 (byte {e.start})") from None


MAX_PROBLEMS_SHOWN = 20  # every problem of a real file; a pathological one is cut


def _validation_message(path: Path, text: str, error: Any) -> str:
    """The first problem by line, as `docket.toml line N: dotted.key: what is wrong`."""
    lines = key_lines(text)
    problems = []
    for detail in error.errors(include_url=False):
        loc = tuple(part for part in detail["loc"] if part != "[key]")
        problems.append((_line_of(lines, loc), _dotted(loc), _reason(detail)))
    problems.sort(key=lambda p: p[0])
    shown = [f"line {line}: {key or '(top level)'}: {reason}" for line, key, reason in problems[:MAX_PROBLEMS_SHOWN]]
    more = f" (and {len(problems) - MAX_PROBLEMS_SHOWN} more)" if len(problems) > MAX_PROBLEMS_SHOWN else ""
    return f"{CONFIG_NAME} " + "; ".join(shown) + more


def _reason(detail: dict[str, Any]) -> str:
    kind, message = detail["type"], detail["msg"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing (this table needs it)"
    if kind == "too_short":
        return "must not be empty"
    if kind == "dict_type" and isinstance(detail.get("input"), list):
        return "must be a table ([[...]] arrays of tables are not used in docket.toml)"
    if kind == "string_pattern_mismatch" and "[key]" in detail["loc"]:
        if detail["loc"][-3:-2] == ("env",):
            return f"{detail['input']!r} is not an environment variable name (letters, digits, '_'; no digit first)"
        return f"{detail['input']!r} is not a valid name (letters, digits, '.', '_', '-'; up to 128)"
    return message.removeprefix("Value error, ")


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            shown = part if _BARE_KEY.fullmatch(part) else '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out += ("." if out else "") + shown
    return out


def _line_of(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int:
    """The line of the longest prefix of loc the file spells out (a missing key: its table's line)."""
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


def key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Each key path of a valid TOML text (tables, dotted and inline keys, array items) -> its first line."""
    return _KeyScanner(text).scan()


class _KeyScanner:
    """A reader of TOML that tomllib has already accepted: it only needs to know where each key is."""

    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.found: dict[tuple[Any, ...], int] = {}
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", text)]

    @property
    def line(self) -> int:
        return bisect.bisect_right(self.line_starts, self.i)

    def scan(self) -> dict[tuple[Any, ...], int]:
        table: tuple[Any, ...] = ()
        while True:
            self.skip(newlines=True)
            if self.i >= len(self.text):
                return self.found
            if self.text.startswith("[[", self.i):
                self.i += 2
                table = self.key()
                self.record(table)
                self.i = self.text.index("]]", self.i) + 2
            elif self.text[self.i] == "[":
                self.i += 1
                table = self.key()
                self.record(table)
                self.i = self.text.index("]", self.i) + 1
            else:
                self.pair(table)

    def record(self, path: tuple[Any, ...]) -> None:
        for end in range(1, len(path) + 1):
            self.found.setdefault(path[:end], self.line)

    def skip(self, *, newlines: bool) -> None:
        spaces = " \t\r\n" if newlines else " \t"
        while self.i < len(self.text):
            char = self.text[self.i]
            if char in spaces:
                self.i += 1
            elif char == "#":
                end = self.text.find("\n", self.i)
                self.i = len(self.text) if end < 0 else end
            else:
                return

    def key(self) -> tuple[str, ...]:
        parts = []
        while True:
            self.skip(newlines=False)
            char = self.text[self.i]
            if char in "\"'":
                parts.append(self.string())
            else:
                match = _BARE_KEY.match(self.text, self.i)
                parts.append(match.group(0) if match else "")
                self.i = match.end() if match else self.i + 1
            self.skip(newlines=False)
            if self.i < len(self.text) and self.text[self.i] == ".":
                self.i += 1
                continue
            return tuple(parts)

    def pair(self, table: tuple[Any, ...]) -> None:
        path = table + self.key()
        self.record(path)
        self.i = self.text.index("=", self.i) + 1
        self.value(path)

    def value(self, path: tuple[Any, ...]) -> None:
        self.skip(newlines=False)
        char = self.text[self.i] if self.i < len(self.text) else ""
        if char in "\"'":
            self.string()
        elif char == "[":
            self.i += 1
            index = 0
            while True:
                self.skip(newlines=True)
                if self.text[self.i] == "]":
                    self.i += 1
                    return
                self.record(path + (index,))
                self.value(path + (index,))
                self.skip(newlines=True)
                if self.text[self.i] == ",":
                    self.i += 1
                    index += 1
        elif char == "{":
            self.i += 1
            while True:
                self.skip(newlines=False)
                if self.text[self.i] == "}":
                    self.i += 1
                    return
                self.pair(path)
                self.skip(newlines=False)
                if self.text[self.i] == ",":
                    self.i += 1
        else:  # a number, boolean or date: up to what ends a value
            while self.i < len(self.text) and self.text[self.i] not in ",]}#\n":
                self.i += 1

    def string(self) -> str:
        quote = self.text[self.i]
        if self.text.startswith(quote * 3, self.i):
            end = self.text.index(quote * 3, self.i + 3)
            while self.text.startswith(quote, end + 3):  # up to two quotes may close the content
                end += 1
            content = self.text[self.i + 3: end]
            self.i = end + 3
            return content
        start = self.i + 1
        self.i = start
        while self.text[self.i] != quote:
            self.i += 2 if quote == '"' and self.text[self.i] == "\\" else 1
        content = self.text[start: self.i]
        self.i += 1
        if quote == '"' and "\\" in content:
            import tomllib

            return tomllib.loads(f'k = "{content}"')["k"]  # the escapes, read as TOML reads them
        return content
