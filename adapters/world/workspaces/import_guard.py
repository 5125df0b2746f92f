"""The import guard: a Python check imports what its execution holds, never the user's checkout behind its back.

A real run recorded a passing suite that had imported the main checkout's
``src/`` through an editable install in the user's virtual environment: the
check tested the user's files, not the candidate. So every check starts with a
folder of docket's own first on ``PYTHONPATH``, holding a ``sitecustomize``
that Python runs at start-up (in the check's process and in every Python
process it starts that inherits the variable). It first runs any other
``sitecustomize`` the interpreter would have found, then puts a finder first on
``sys.meta_path`` that asks the others where a module would come from: a
module whose file (or package folder) lies inside the user's checkout and
outside the allowed roots cannot be imported (ImportError naming the module
and the path), and the refusal is also written, one line starting with
MARKER, to the stderr the check started with (pytest's capture of the file
descriptors comes later and cannot hide it). docket fails the check when its
log holds such a line (``import-outside-execution``), though the check's code
caught the ImportError. Allowed: the execution (also when it lies inside the
checkout), the interpreter's own installation (``sys.prefix``,
``sys.base_prefix``, ``sys.exec_prefix``: the virtual environment or toolchain
the check's command runs, inside the checkout too, and its site-packages, the user's own included) and the folders
``DOCKET_IMPORT_ALLOW`` names (``os.pathsep``-separated, from the check's
configured environment). Only Python is guarded; a process started with
``-I`` or ``-E`` ignores ``PYTHONPATH`` and is not.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from ..files.files import own_folder
from ....domain.containment.processes import output_text

__all__ = ["MARKER", "guard_environment", "guard_folder", "violations"]

MARKER = "docket: import refused: "
_READ_LIMIT = 64 * 1024 * 1024  # a log is searched this far for refusals

SITECUSTOMIZE = r'''
"""docket's import guard (written by docket; see docket/adapters/world/workspaces/import_guard.py)."""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))


def _chain():
    """Run the sitecustomize this one hides, if the interpreter has one."""
    path = [p for p in sys.path if os.path.realpath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _roots(value):
    return [os.path.realpath(p) for p in value.split(os.pathsep) if p]


def _inside(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _DocketImportGuard:
    """First on sys.meta_path: asks the finders after it, refuses a spec from inside the user's checkout."""

    def __init__(self, denied, allowed, report):
        self.denied, self.allowed, self.report = denied, allowed, report

    def find_spec(self, name, path=None, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                self.check(name, spec)
                return spec
        if path is None:  # found nowhere: a sandbox that hides the checkout makes its import fail, but not silently
            for place in self.hidden(name):
                if os.path.lexists(place):
                    self.refuse(name, place)
        return None

    def hidden(self, name):
        """Where a top-level module would come from if the checkout could be read: sys.path entries in it (an
        editable install's .pth), and the MAPPING of a setuptools editable finder."""
        top = name.partition(".")[0]
        for entry in sys.path:
            if entry and self.denied_root(os.path.realpath(entry)) is not None:
                yield os.path.join(entry, top, "__init__.py")
                yield os.path.join(entry, top)
                yield os.path.join(entry, top + ".py")
        for finder in sys.meta_path:
            mapping = getattr(sys.modules.get(getattr(finder, "__module__", "") or ""), "MAPPING", None)
            if isinstance(mapping, dict) and isinstance(mapping.get(top), str):
                yield mapping[top]

    def denied_root(self, real):
        root = next((r for r in self.denied if _inside(real, r)), None)
        if root is None or any(_inside(real, a) for a in self.allowed):
            return None
        return root

    def check(self, name, spec):
        places = list(spec.submodule_search_locations or ())
        if spec.origin and spec.has_location:
            places.insert(0, spec.origin)
        for place in places:
            self.refuse(name, place)

    def refuse(self, name, place):
        """ImportError (and a line on the check's first stderr) when place lies in the checkout, not allowed."""
        real = os.path.realpath(place)
        root = self.denied_root(real)
        if root is not None:
            message = (f"module {name} resolves to {real}, inside the user's checkout {root}, not the check's "
                       f"execution: the check would test the checkout's files, not the candidate's")
            if self.report is not None:
                try:
                    os.write(self.report, ("MARKER" + message + "\n").encode("utf-8", "replace"))
                except OSError:
                    pass
            raise ImportError("MARKER" + message, name=name, path=real)

    def invalidate_caches(self):
        pass


def _install():
    denied = _roots(os.environ.get("DOCKET_IMPORT_DENY", ""))
    if not denied:
        return
    allowed = _roots(os.environ.get("DOCKET_IMPORT_ALLOW", ""))
    allowed += [os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}] + [_HERE]
    try:
        import site
        allowed += [os.path.realpath(p) for p in [*site.getsitepackages(), site.getusersitepackages()]]
    except (AttributeError, OSError):
        pass
    try:
        report = os.dup(2)
    except OSError:
        report = None
    sys.meta_path.insert(0, _DocketImportGuard(denied, allowed, report))


try:
    _chain()
finally:
    _install()
'''.replace("MARKER", MARKER.replace('"', ""))


def guard_folder(docket_dir: Path) -> Path:
    """The folder holding the guard's sitecustomize.py, written (atomically, when it differs) under docket_dir."""
    folder = docket_dir / "import-guard"
    target = folder / "sitecustomize.py"
    try:
        if target.read_text(encoding="utf-8") == SITECUSTOMIZE:
            return folder
    except OSError:
        pass

    own_folder(docket_dir, folder)
    partial = folder / f".sitecustomize.{os.getpid()}.{threading.get_ident()}.partial"  # tasks check at once
    partial.write_text(SITECUSTOMIZE, encoding="utf-8")
    os.replace(partial, target)
    return folder


def guard_environment(env: Mapping[str, str], *, folder: Path, checkout: Path | None,
                      execution: str) -> dict[str, str]:
    """env for a check guarded by the sitecustomize in folder: folder first on PYTHONPATH, the checkout denied, the
    execution (and whatever env's own DOCKET_IMPORT_ALLOW names) allowed. Unchanged without a checkout."""
    if checkout is None:
        return dict(env)
    guarded = dict(env)
    guarded["PYTHONPATH"] = os.pathsep.join([str(folder), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    guarded["DOCKET_IMPORT_DENY"] = str(checkout)
    guarded["DOCKET_IMPORT_ALLOW"] = os.pathsep.join(
        [execution, *([env["DOCKET_IMPORT_ALLOW"]] if env.get("DOCKET_IMPORT_ALLOW") else [])])
    return guarded


def violations(log_path: Path, *, limit: int = 3) -> list[str]:
    """The guard's refusals the check's log holds (the text after MARKER), the first few."""

    found: list[str] = []
    try:
        with open(log_path, "rb") as log:
            data = log.read(_READ_LIMIT)
    except OSError:
        return found
    marker = MARKER.encode("utf-8")
    for line in data.splitlines():
        at = line.find(marker)
        if at >= 0:
            text = output_text(line[at + len(marker):]).strip()  # written by the check: hostile bytes
            if text not in found:
                found.append(text)
            if len(found) >= limit:
                break
    return found
