"""The sandbox of one launch (an agent, a check, a hook), with its roots found on this machine: system folders, the installs its PATH and command come
from, its configured extras, and a private temporary folder. The policy itself is a pure value
(domain/containment/sandbox.py); Landlock enforces it (landlock.py).

Read roots, and why each:

- ``/usr``, ``/bin``, ``/sbin``, ``/lib*``: programs and their libraries.
- ``/etc``: name resolution, certificates, locale, the system's git config (an
  unprivileged user cannot read its secrets, e.g. ``/etc/shadow``, anyway).
- ``/opt`` and ``/nix/store``: where toolchains outside the package manager live.
- ``/run/systemd/resolve``: where ``/etc/resolv.conf`` points on systemd hosts.
- ``/sys``: CPU and memory limits that runtimes read.
- the folders on the launch's PATH, each with the install it belongs to (a
  ``bin`` folder's parent, a virtual environment with its base interpreter, a
  package's ``node_modules``), the command's own program and the files its
  arguments name;
- ``~/.gitconfig`` and ``~/.config/git``: git needs the user's name and email;
- the configured ``read`` extras (an agent's own config folder, say ``~/.claude``):
  the user chose them, they are kept whole.

Under the home folder, never a dot-folder whole (``~/.cargo`` holds
``credentials.toml``, ``~/.local`` holds docket's own data and other tools'):

- a PATH folder under the home is allowed itself, and the programs in it that
  are links are followed to their real install (a venv by its ``pyvenv.cfg``,
  pipx's and uv's under ``~/.local/share/...``, an npm package);
- ``~/.local/bin`` also brings ``~/.local/lib`` (pip --user's site-packages) and
  nothing else of ``~/.local``;
- a tool manager's folder (``~/.pyenv``, ``~/.nvm``, ``~/.rustup``,
  ``~/.cargo``, ``~/.volta``, ``~/.bun``: the first dot-folder of a PATH folder
  under the home, other than ``.local``, ``.config`` and ``.cache``) is allowed
  as its entries one by one, less every credential-looking name
  (``CREDENTIAL_NAME``: one holding credential, token, secret, passw, auth,
  netrc, cookie, session, apikey, private or keyring, starting ``id_``, ending
  ``.pem``, ``.key``, ``.p12``, ``.pfx``, ``.jks``, ``.keystore``, ``.gpg`` or
  ``.asc``, or named ``hosts.yml`` or ``config.json``);
- nothing found this way contains or lies in a forbidden path
  (``forbidden_paths``): the home's known secrets (``HOME_SECRETS``: ``~/.ssh``,
  ``~/.gnupg``, ``~/.aws``, ``~/.config/gh``, ``~/.docker``, ``~/.kube``,
  ``~/.npmrc``, ``~/.netrc``, ``~/.pypirc``, ``~/.git-credentials``,
  ``~/.cargo/credentials*``, docket's ``~/.docket`` and ``~/.config/docket``...),
  docket's data folder (every workspace and execution), and the user's
  repository when the caller names it. Landlock only allows, so a root that
  contains a forbidden path is replaced by its entries less the branch leading
  to it, recursively (``subtract``); one inside a forbidden path is dropped.

Never the home folder as a whole, never docket's own folders (ledger, views,
logs, receipts, keys), never another workspace: only what is listed is allowed.
``/dev/shm`` is writable (POSIX semaphores, multiprocessing), but not the host's:
each launch gets a fresh one of its own, in its private mount namespace
(``private_mounts.py``), gone with it; ``/tmp`` is not writable (nor the host's
visible): TMPDIR names the launch's private temporary folder instead.

Where the kernel has no Landlock, a sandboxed launch is refused
(``sandbox-unavailable``): only ``sandbox = "off"``, written in docket.toml, runs
anything unsandboxed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ....domain.kernel.codes import Code
from ....domain.kernel.errors import Refused
from ....domain.containment.sandbox import Confinement, SandboxPolicy, unsandboxed
from .landlock import abi_version, effective
from ..files.paths import data_dir
from ..files.user_config import config_home
from ....domain.containment.egress import is_host_list

__all__ = ["CREDENTIAL_NAME", "HOME_SECRETS", "SYSTEM_READ", "SYSTEM_WRITE", "expand_home", "forbidden_paths",
           "install_roots", "launch_policy", "require_sandbox", "sandbox_for", "subtract"]

SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store",
               "/run/systemd/resolve", "/sys")
SYSTEM_WRITE: tuple[str, ...] = ()  # /dev/shm: a fresh one per launch, allowed in the child (landlock.py)
_MIXED_HOME_FOLDERS = frozenset({".local", ".config", ".cache"})  # hold unrelated, sometimes secret, data
# The home's known secret folders and files, and docket's own (its keys, its config): no root found automatically
# contains one or lies in one (``subtract``). Relative to the home folder.
HOME_SECRETS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".password-store", ".config/gh",
                ".config/hub", ".config/gcloud", ".config/op", ".config/docket", ".config/git/credentials",
                ".local/share/keyrings", ".terraform.d", ".vault-token", ".npmrc", ".yarnrc", ".yarnrc.yml",
                ".netrc", ".pypirc", ".pgpass", ".my.cnf", ".git-credentials", ".cargo/credentials",
                ".cargo/credentials.toml", ".docket")
# A name a tool manager's folder keeps a credential under: its word anywhere (credentials.toml, .npm-token,
# auth.json, hosts.yml, ...), a key or certificate's suffix, or docker's config.json (its "auths").
CREDENTIAL_NAME = re.compile(
    r"credential|token|secret|passw|auth|netrc|cookie|session|apikey|api_key|private|keyring|^hosts\.ya?ml$"
    r"|^config\.json$|^id_|\.(?:pem|key|p12|pfx|jks|keystore|gpg|asc)$", re.IGNORECASE)
_MAX_PROGRAMS = 4096  # the entries of one PATH folder looked at for the installs they link to
_MAX_DEPTH = 4  # venvs made from venvs, followed this deep


def expand_home(path: str, home: Path) -> Path:
    """A configured extra path: ``~`` or ``~/...`` is under home; anything else is taken as written (absolute)."""
    if path == "~" or path.startswith("~/"):
        return home / path[2:] if path != "~" else home
    return Path(path)


def _under_home(path: Path, home: Path | None) -> tuple[str, ...] | None:
    """path's parts below home, or None when path is not strictly inside home."""
    if home is None or path == home or not path.is_relative_to(home):
        return None
    return path.relative_to(home).parts


def _too_broad(path: Path, home: Path | None) -> bool:
    """Whether path would open more of the home than one install: the home or above, a folder of the home whole
    (``~/.cargo``, ``~/work``), or a mixed folder's first level (``~/.local/share``, ``~/.cache/x``)."""
    if home is not None and home.is_relative_to(path):
        return True
    parts = _under_home(path, home)
    if parts is None:
        return False
    return len(parts) == 1 or parts[0] in _MIXED_HOME_FOLDERS and len(parts) <= 2


def _package(path: Path) -> Path | None:
    """The npm package path belongs to (``node_modules/<name>`` or ``node_modules/@scope/<name>``; the outermost,
    whose dependencies are nested in it), if any."""
    parts = path.parts
    if "node_modules" not in parts:
        return None
    at = parts.index("node_modules")
    if at + 1 >= len(parts) or parts[at + 1] == ".bin":
        return Path(*parts[:at]) if at + 1 < len(parts) else None  # node_modules/.bin: the package holding it
    width = 3 if parts[at + 1].startswith("@") else 2
    return Path(*parts[:at + width]) if at + width <= len(parts) else None


def _prefix(program: Path, home: Path | None, depth: int = 0) -> list[Path]:
    """The install a resolved program belongs to: its npm package, its virtual environment (pyvenv.cfg, with the
    base interpreter's install), its ``bin`` folder's parent unless that is too broad, else the program alone."""
    package = _package(program)
    if package is not None and not _too_broad(package, home):
        return [package]
    folder = program.parent
    if folder.name in ("bin", "sbin") and folder.parent != Path("/"):
        if (folder.parent / "pyvenv.cfg").is_file():
            return [folder.parent, *_venv_home(folder.parent, home, depth + 1)]
        if not _too_broad(folder.parent, home):
            return [folder.parent]
    return [program]


def _tool_entries(folder: Path) -> list[Path]:
    """A tool manager's folder (``~/.cargo``, ``~/.pyenv``, ``~/.nvm``...) as its entries one by one, resolved, less
    every credential-looking name (CREDENTIAL_NAME), as written or as linked: the toolchains stay readable,
    ``credentials.toml`` does not."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    roots = []
    for name in names:
        try:
            real = (folder / name).resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if not CREDENTIAL_NAME.search(name) and not CREDENTIAL_NAME.search(real.name):
            roots.append(real)
    return roots


def _linked_installs(folder: Path, home: Path | None, depth: int) -> list[Path]:
    """The installs the programs of a PATH folder under the home link to (``~/.local/bin/black`` is pipx's venv under
    ``~/.local/share/pipx/venvs/black``), each resolved to its real prefix (``_prefix``)."""
    roots: list[Path] = []
    try:
        with os.scandir(folder) as entries:
            for number, entry in enumerate(entries):
                if number >= _MAX_PROGRAMS:
                    break
                if entry.is_symlink():
                    try:
                        roots += _prefix(Path(entry.path).resolve(strict=True), home, depth + 1)
                    except (OSError, RuntimeError):
                        continue
    except OSError:
        return []
    return roots


def _install_root(real: Path, home: Path | None, depth: int = 0) -> list[Path]:
    """The roots a resolved folder of programs opens besides itself.

    Its install: a ``bin`` folder's parent (a virtual environment's with its
    base interpreter's); a package's ``node_modules/.bin`` is its whole package,
    whose programs spawn binaries vendored beside it. Under the home, never a
    dot-folder whole: ``~/.local/bin`` adds ``~/.local/lib`` (pip --user's
    site-packages) and nothing else of ``~/.local``; a tool manager's folder
    (``~/.cargo/bin`` -> ``~/.cargo``) is its entries one by one less the
    credential-looking ones; nothing too broad (``_too_broad``). And the programs
    of a folder under the home are followed to the installs they link to.
    depth bounds the chains a pyvenv.cfg can make (one may name itself).
    """
    if depth > _MAX_DEPTH:
        return []
    if real.name == ".bin" and real.parent.name == "node_modules":
        return [real.parent.parent] if not _too_broad(real.parent.parent, home) else []
    parts = _under_home(real, home)
    roots = _linked_installs(real, home, depth) if parts is not None else []
    if home is not None and parts == (".local", "bin"):
        return [*roots, home / ".local" / "lib"]
    if home is not None and parts is not None and parts[0].startswith(".") and parts[0] not in _MIXED_HOME_FOLDERS:
        return [*roots, *_tool_entries(home / parts[0])]
    if real.name in ("bin", "sbin") and real.parent != Path("/"):
        if (real.parent / "pyvenv.cfg").is_file():
            return [*roots, real.parent, *_venv_home(real.parent, home, depth + 1)]
        if not _too_broad(real.parent, home):
            return [*roots, real.parent]
    return roots


def install_roots(folders: Iterable[str], programs: Iterable[str], home: Path | None) -> list[Path]:
    """The installs of the folders of programs (PATH) and of the programs themselves, symlinks resolved (the home's
    too: where /home links to /var/home, its folders are still the home's); never the home or anything above it."""
    home = _real(home)
    roots: set[Path] = set()
    for folder in folders:
        if not folder or not os.path.isabs(folder):
            continue
        try:
            real = Path(folder).resolve(strict=True)
        except OSError:
            continue
        roots.add(real)
        roots.update(_install_root(real, home))
    for program in programs:
        try:
            real = Path(program).resolve(strict=True)
        except OSError:
            continue
        roots.add(real)
        roots.update(_prefix(real, home))
        where = Path(os.path.abspath(program)).parent  # the folder it was named in: a venv's python links out of it
        if where.name in ("bin", "sbin"):
            try:
                roots.update(_install_root(where.resolve(strict=True), home))
            except (OSError, RuntimeError):
                pass
    return sorted(root for root in roots if home is None or not home.is_relative_to(root))


def _real(path: Path | None) -> Path | None:
    """path with its links resolved, as the roots found are; as given when it cannot be."""
    if path is None:
        return None
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def subtract(allowed: Iterable[Path], forbidden: Iterable[Path],
             entries: Callable[[Path], Iterable[Path]] | None = None) -> list[Path]:
    """allowed less forbidden, as Landlock can say it (it only allows): a root inside a forbidden path is dropped; a
    root containing one is replaced by its entries (``entries``, default: its own folder's, links left out),
    recursively, less the branch leading to it. Paths are compared as written: pass them resolved."""
    listed = entries if entries is not None else _plain_entries
    banned = sorted(set(forbidden))
    kept: set[Path] = set()
    pending = sorted(set(allowed))
    while pending:
        root = pending.pop()
        if any(root.is_relative_to(b) for b in banned):
            continue
        if any(b.is_relative_to(root) for b in banned):
            pending += listed(root)
        else:
            kept.add(root)
    return sorted(kept)


def _plain_entries(folder: Path) -> list[Path]:
    """A folder's entries that are not links (a link in a split root could lead anywhere, even back above it); none
    when it cannot be listed (nothing is the safe way round)."""
    try:
        with os.scandir(folder) as found:
            return [Path(e.path) for e in found if not e.is_symlink()]
    except OSError:
        return []


def forbidden_paths(home: Path | None, *, data: Path | None = None, extra: Iterable[Path] = ()) -> list[Path]:
    """What no root found automatically may reach: the home's secrets (HOME_SECRETS), docket's data folder (every
    workspace and execution of every repository), and extra (the user's repository, when known)."""
    paths = [home / secret for secret in HOME_SECRETS] if home is not None else []
    paths += [*([data] if data is not None else []), *extra]
    resolved = set(paths)
    for path in paths:  # a secret folder may be a link to elsewhere: both its name and its target are kept out
        try:
            resolved.add(path.resolve())
        except (OSError, RuntimeError):
            pass
    return sorted(resolved)


def _venv_home(root: Path, home: Path | None, depth: int) -> list[Path]:
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
            return [real, *_install_root(real, home, depth)]
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
                  extra_read: Sequence[str] = (), network: str | tuple[int, ...] | tuple[str, ...],
                  argv: Sequence[str],
                  env: Mapping[str, str], cwd: Path, home: Path | None = None,
                  forbidden: Iterable[Path] = ()) -> SandboxPolicy:
    """The enforced policy of one launch: its own roots, the system's, its programs' installs less what they must
    not reach (the home's secrets and forbidden: ``forbidden_paths``), its extras (the user's choice, kept whole)."""
    home = home if home is not None else _home()
    path = env.get("PATH", os.defpath).split(os.pathsep)
    programs = _program(argv, env, cwd)
    found = subtract(install_roots(path, programs, home), forbidden_paths(home, extra=forbidden))
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

    if abi_version() < 1:
        where = "macOS" if sys.platform == "darwin" else "this kernel"
        raise Refused(Code.SANDBOX_UNAVAILABLE, f"{where} offers no Landlock, so docket cannot sandbox the agents, "
                      'checks and hooks it launches; set sandbox = "off" in docket.toml to run them unsandboxed '
                      "(every view of the run then says so)")


def sandbox_for(confinement: Confinement, *, write: Sequence[Path], read: Sequence[Path], temporary: Path,
                argv: Sequence[str], env: dict[str, str], cwd: Path, forbidden: Sequence[Path] = (),
                egress_key: str | None = None) -> SandboxPolicy:
    """The policy of one launch; with a sandbox, its private temporary folder is made and named in env's TMPDIR.
    No root found automatically reaches docket's data folder (every workspace and execution) nor forbidden (the
    user's repository, where the caller knows it). A network that lists hosts gets its egress proxy, opened here
    under egress_key (``egress_proxy.close_proxy(egress_key)`` when the launch ends) and named in env; without a
    key, no proxy: the launch may then connect nowhere."""
    if confinement.mode == "off":
        return unsandboxed()
    require_sandbox(confinement)

    temporary.mkdir(parents=True, exist_ok=True, mode=0o700)
    env["TMPDIR"] = str(temporary)

    policy = launch_policy(write=[*write, temporary], read=read, extra_write=confinement.write,
                           extra_read=confinement.read, network=confinement.network, argv=argv,
                           env=env, cwd=cwd, forbidden=[data_dir(), config_home(), *forbidden])
    policy = effective(policy, abi_version())

    if egress_key is not None and is_host_list(policy.network):
        from .egress_proxy import open_proxy, proxy_environment

        proxy = open_proxy(egress_key, policy.network)  # type: ignore[arg-type]
        env.update(proxy_environment(proxy.port))
        policy = policy.through_proxy(proxy.port)
    return policy
