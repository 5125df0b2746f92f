"""Type-check all of docket with mypy, as the installed package sees itself (``python -m tests.typecheck``).

The package ``docket`` is assembled by pyproject.toml's ``[tool.setuptools.package-dir]`` (``docket`` is
cli/_root, ``docket.domain`` is domain/, ...), so on a plain clone there is no folder named docket for mypy to find.
This builds one of symlinks, ``build/typecheck/docket/``, and runs ``mypy -p docket`` on it with MYPYPATH pointing
there and the configuration in pyproject.toml's ``[tool.mypy]``. mypy's messages name the symlinked paths; they are
printed with the repository's own paths (``build/typecheck/docket/domain/x.py`` -> ``domain/x.py``). The exit status
is mypy's. Extra arguments are passed to mypy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEW = ROOT / "build" / "typecheck"
PACKAGE = VIEW / "docket"

# Each entry of the view and what it points at, relative to the view's docket folder (as package-dir says).
LINKS: dict[str, str] = {
    "__init__.py": "../../../cli/_root/__init__.py",
    "__main__.py": "../../../cli/_root/__main__.py",
    "pydantic_plugins.py": "../../../cli/_root/pydantic_plugins.py",
    "domain": "../../../domain",
    "projections": "../../../projections",
    "adapters": "../../../adapters",
    "cli": "../../../cli",
}


def build_view() -> None:
    """Make build/typecheck/docket/ the package's symlink view, replacing what is stale."""
    PACKAGE.mkdir(parents=True, exist_ok=True)
    for name, target in LINKS.items():
        link = PACKAGE / name
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    for stale in PACKAGE.iterdir():
        if stale.name not in LINKS and stale.is_symlink():
            stale.unlink()


def main(argv: list[str]) -> int:
    build_view()
    env = dict(os.environ, MYPYPATH=str(VIEW))
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "-p", "docket", *argv]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    prefix = f"{VIEW.relative_to(ROOT)}/docket/"
    for stream, text in ((sys.stdout, result.stdout), (sys.stderr, result.stderr)):
        for line in text.splitlines(keepends=True):
            stream.write(_real_path(line, prefix))
    return result.returncode


def _real_path(line: str, prefix: str) -> str:
    """A message about build/typecheck/docket/<x> named by its path in the repository."""
    if line.startswith(prefix):
        line = line[len(prefix):]
        for name, target in LINKS.items():
            if line.startswith(name + ":") or line.startswith(name + "/"):
                return target.removeprefix("../../../") + line[len(name):]
    return line


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
