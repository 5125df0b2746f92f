"""The user's own word on what a repository's docket.toml may widen, kept outside every repository.

An agent writes the repository, so a repository's docket.toml alone never widens
a sandbox. What widens one (``Config.widenings``: extra read or write roots, an
environment allow-list, a network beyond the default, hooks, identities trusted
to answer the inbox, ``sandbox = "off"``) is honoured only for a docket.toml
whose sha256 its user trusts for that repository: ``docket config trust``, after
reading it, as direnv's ``allow`` does for an ``.envrc``. A docket.toml changed
since (by anyone: a person, or an agent's candidate a person approved) is refused
(``config-untrusted``, exit 3) until it is trusted again.

The file is ``$XDG_CONFIG_HOME/docket/trust.toml`` (``~/.config/docket/`` by
default; never inside a repository, and never readable by a sandboxed launch:
``sandbox_roots.HOME_SECRETS``)::

    # docket: the docket.toml versions this user trusts to widen a sandbox
    any_repository = false        # true: every repository's (a CI runner of one's own repository)

    [[trusted]]
    repository = "/home/me/src/app/.git"
    sha256 = "3f2a..."
    trusted_at = "2026-12-07T04:00:00.000Z"
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from ....domain.kernel.codes import Code
from ....domain.kernel.errors import BadInput
import json

__all__ = ["config_home", "trust", "trust_file", "trusts"]

MAX_TRUST_BYTES = 1 << 20
MAX_TRUSTED = 10_000


def config_home() -> Path:
    """docket's folder of the user's own configuration: ``$XDG_CONFIG_HOME/docket``, else ``~/.config/docket``."""
    chosen = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(chosen) if chosen and os.path.isabs(chosen) else Path.home() / ".config"
    return base / "docket"


def trust_file() -> Path:
    return config_home() / "trust.toml"


def _read() -> dict[str, Any]:
    path = trust_file()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise BadInput(Code.BAD_TRUST_FILE, f"{path}: {e.strerror} (a symlink there is never followed)") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise BadInput(Code.BAD_TRUST_FILE, f"{path} is not a regular file")
        data = f.read(MAX_TRUST_BYTES + 1)
    if len(data) > MAX_TRUST_BYTES:
        raise BadInput(Code.BAD_TRUST_FILE, f"{path} is larger than {MAX_TRUST_BYTES // 1024} KiB")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BadInput(Code.BAD_TRUST_FILE, f"{path}: {e}") from None
    trusted = document.get("trusted", [])
    if not isinstance(document.get("any_repository", False), bool) or not isinstance(trusted, list) or not all(
            isinstance(t, dict) and isinstance(t.get("repository"), str) and isinstance(t.get("sha256"), str)
            for t in trusted):
        raise BadInput(Code.BAD_TRUST_FILE, f"{path}: any_repository is true or false, and each [[trusted]] has "
                                            "repository and sha256 (text)")
    return document


def _key(repository: Path) -> str:
    return str(repository.resolve())


def trusts(repository: Path, sha256: str) -> bool:
    """Whether the user trusts the docket.toml of this digest in this repository (its git common dir)."""
    document = _read()
    if document.get("any_repository") is True:
        return True
    key = _key(repository)
    return any(t["repository"] == key and t["sha256"] == sha256 for t in document.get("trusted", []))


def trust(repository: Path, sha256: str, now: str) -> bool:
    """Record that the user trusts this docket.toml digest in this repository; False when it was already. The file
    is replaced whole (written beside it, fsynced, renamed) and readable by its owner only."""
    document = _read()
    trusted = list(document.get("trusted", []))
    key = _key(repository)
    if any(t["repository"] == key and t["sha256"] == sha256 for t in trusted):
        return False
    trusted = [*trusted, {"repository": key, "sha256": sha256, "trusted_at": now}][-MAX_TRUSTED:]
    lines = ["# docket: the docket.toml versions this user trusts to widen a sandbox (docket config trust)",
             f"any_repository = {'true' if document.get('any_repository') else 'false'}", ""]
    for t in trusted:
        lines += ["[[trusted]]", f"repository = {_string(t['repository'])}", f"sha256 = {_string(t['sha256'])}",
                  f"trusted_at = {_string(str(t.get('trusted_at', '')))}", ""]
    folder = config_home()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = folder / f".trust.toml.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, trust_file())
    return True


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string is JSON's, for the text docket writes here
