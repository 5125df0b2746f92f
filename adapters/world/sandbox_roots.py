"""The sandbox of one launch (an agent, a check, a hook), with its roots found on this machine: system folders, the installs its PATH and command come
from, its configured extras, and a private temporary folder. The policy itself is a pure value
(domain/sandbox.py); Landlock enforces it (landlock.py).

Read roots, and why each:

- ``/usr``, ``/bin``, ``/sbin``, ``/lib*``: programs and their libraries.
- ``/etc``: name resolution, certificates, locale, the system's git config (an
  unprivileged user cannot read its secrets, e.g. ``/etc/shadow``, anyway).
- ``/opt`` and ``/nix/store``: where toolchains outside the package manager live.
- ``/run/systemd/resolve``: where ``/etc/resolv.conf`` points on systemd hosts.
- ``/sys``: CPU and memory limits that runtimes read.
- the folders on the launch's PATH, each with the install it belongs to (a
  ``bin`` folder's parent; under the home folder, a tool manager's whole folder
  such as ``~/.pyenv`` or ``~/.nvm``), the command's own program and the files
  its arguments name, and the interpreter a virtual environment points to;
- ``~/.gitconfig`` and ``~/.config/git``: git needs the user's name and email;
- the configured ``read`` extras (an agent's own config folder, say ``~/.claude``).

Never the home folder as a whole, never docket's own folders (ledger, views,
logs, receipts, keys), never another workspace: only what is listed is allowed.
``/dev/shm`` is writable (POSIX semaphores, multiprocessing); ``/tmp`` is not:
TMPDIR names the launch's private temporary folder instead.

Where the kernel has no Landlock, a sandboxed launch is refused
(``sandbox-unavailable``): only ``sandbox = "off"``, written in docket.toml, runs
anything unsandboxed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ...domain.codes import Code
from ...domain.errors import Refused
from ...domain.sandbox import Confinement, SandboxPolicy, unsandboxed

__all__ = ["SYSTEM_READ", "SYSTEM_WRITE", "expand_home", "install_roots", "launch_policy", "require_sandbox",
           "sandbox_for"]

SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store",
               "/run/systemd/resolve", "/sys")
SYSTEM_WRITE = ("/dev/shm",)
_MIXED_HOME_FOLDERS = frozenset({".local", ".config", ".cache"})  # hold unrelated, sometimes secret, data


def expand_home(path: str, home: Path) -> Path:
    """A configured extra path: ``~`` or ``~/...`` is under home; anything else is taken as written (absolute)."""
    if path == "~" or path.startswith("~/"):
        return home / path[2:] if path != "~" else home
    return Path(path)


def _install_root(real: Path, home: Path | None) -> Path:
    """The install a resolved folder of programs belongs to: a package's node_modules/.bin is its whole install (its
    programs spawn binaries vendored in sibling packages)."""
    if real.name == ".bin" and real.parent.name == "node_modules":
        return real.parent.parent
    if home is not None and real.is_relative_to(home) and real != home:
        first = real.relative_to(home).parts[0]
        if first.startswith(".") and first not in _MIXED_HOME_FOLDERS:
            return home / first  # a tool manager: ~/.pyenv, ~/.nvm, ~/.cargo, ~/.rustup, ~/.volta, ~/.bun
    return real.parent if real.name in ("bin", "sbin") and real.parent != Path("/") else real


def install_roots(folders: Iterable[str], programs: Iterable[str], home: Path | None) -> list[Path]:
    """The installs of the folders of programs (PATH) and of the programs themselves, symlinks resolved."""
    roots: set[Path] = set()
    for folder in folders:
        if not folder or not os.path.isabs(folder):
            continue
        try:
            real = Path(folder).resolve(strict=True)
        except OSError:
            continue
        roots.add(real)
        roots.add(_install_root(real, home))
    for program in programs:
        try:
            real = Path(program).resolve(strict=True)
        except OSError:
            continue
        roots.add(real)
        for where in {Path(os.path.abspath(program)).parent, real.parent}:  # a venv's python links out of it
            if where.name in ("bin", "sbin"):
                root = _install_root(where, home)
                roots.add(root)
                roots.update(_venv_home(root, home))
    return sorted(roots)


def _venv_home(root: Path, home: Path | None) -> list[Path]:
    """A virtual environment's base interpreter's install (pyvenv.cfg's home)."""
    try:
        lines = (root / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and os.path.isabs(value.strip()):
            try:
                real = Path(value.strip()).resolve(strict=True)
            except OSError:
                return []
            return [real, _install_root(real, home)]
    return []


_ABSOLUTE = re.compile(r"""(/[^\s'"();&|<>`$]+)""")


def _program(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> list[str]:
    """The command's program, and the existing files its arguments name by absolute path (also inside a shell
    script: ``sh -c '/path/to/python -m pytest'``)."""
    if not argv:
        return []
    first = argv[0]
    found = str(cwd / first) if "/" in first else shutil.which(first, path=env.get("PATH", os.defpath))
    files = [found] if found else []
    for argument in argv[1:]:
        files += [path for path in _ABSOLUTE.findall(argument) if os.path.isfile(path)]
    return files


def launch_policy(*, write: Iterable[Path], read: Iterable[Path], extra_write: Sequence[str] = (),
                  extra_read: Sequence[str] = (), network: str | tuple[int, ...], argv: Sequence[str],
                  env: Mapping[str, str], cwd: Path, home: Path | None = None) -> SandboxPolicy:
    """The enforced policy of one launch: its own roots, the system's, its programs' installs, its extras."""
    home = home if home is not None else _home()
    path = env.get("PATH", os.defpath).split(os.pathsep)
    programs = _program(argv, env, cwd)
    found = install_roots(path, programs, home)
    if home is not None:  # a PATH naming the home folder, or / itself, never opens the whole home
        found = [root for root in found if not home.is_relative_to(root)]
    reads = [*map(Path, SYSTEM_READ), *read, *found]
    if home is not None:
        reads += [home / ".gitconfig", home / ".config" / "git"]
    reads += [expand_home(extra, home or Path("/nonexistent")) for extra in extra_read]
    writes = [*map(Path, SYSTEM_WRITE), *write, *(expand_home(extra, home or Path("/nonexistent"))
                                                 for extra in extra_write)]
    return SandboxPolicy.of(write=(str(p) for p in writes if os.path.lexists(p)),
                            read=(str(p) for p in reads if os.path.lexists(p)), network=network)


def _home() -> Path | None:
    home = os.environ.get("HOME")
    return Path(home) if home and os.path.isabs(home) else None


def require_sandbox(confinement: Confinement) -> None:
    """Refuse now when the configuration asks for a sandbox this machine cannot enforce."""
    if confinement.mode == "off":
        return
    from .landlock import abi_version

    if abi_version() < 1:
        where = "macOS" if sys.platform == "darwin" else "this kernel"
        raise Refused(Code.SANDBOX_UNAVAILABLE, f"{where} offers no Landlock, so docket cannot sandbox the agents, "
                      'checks and hooks it launches; set sandbox = "off" in docket.toml to run them unsandboxed '
                      "(every view of the run then says so)")


def sandbox_for(confinement: Confinement, *, write: Sequence[Path], read: Sequence[Path], temporary: Path,
                argv: Sequence[str], env: dict[str, str], cwd: Path) -> SandboxPolicy:
    """The policy of one launch; with a sandbox, its private temporary folder is made and named in env's TMPDIR."""
    if confinement.mode == "off":
        return unsandboxed()
    require_sandbox(confinement)
    from .landlock import abi_version, effective

    temporary.mkdir(parents=True, exist_ok=True, mode=0o700)
    env["TMPDIR"] = str(temporary)
    policy = launch_policy(write=[*write, temporary], read=read, extra_write=confinement.write,
                           extra_read=confinement.read, network=confinement.network, argv=argv,
                           env=env, cwd=cwd)
    return effective(policy, abi_version())
