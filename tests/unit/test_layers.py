"""Dependencies point one way: cli -> adapters/service_layer -> adapters/world, projections -> domain.

Read from the source with ast, resolving relative imports, so a module that
reaches the wrong way fails here before it becomes a habit.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {  # folder -> the dotted package it installs as
    "domain": "docket.domain", "projections": "docket.projections", "adapters": "docket.adapters",
    "cli": "docket.cli",
}
# what each layer may import of docket (prefixes); the most specific layer a module is in decides
_DOMAIN = ("docket.domain.kernel",)
_WORLD = ("docket.adapters.world.faults", "docket.adapters.world.clock")  # crash points and the clock: for all below
_LEDGER_KERNEL = ("docket.adapters.service_layer.kernel",)
_BELOW_CLI = ("docket.adapters", "docket.domain", "docket.projections", "docket")
ALLOWED = {
    # the pure core, floor by floor: the kernel (codes, errors, canonical JSON, the chain, values and names), what a
    # launch may touch and what a run trusts, the events, what a run's record reports, then the aggregates
    "docket.domain": ("docket.domain",),
    "docket.domain.kernel": _DOMAIN,
    "docket.domain.containment": (*_DOMAIN, "docket.domain.containment"),
    "docket.domain.events": (*_DOMAIN, "docket.domain.containment", "docket.domain.events"),
    "docket.domain.reports": (*_DOMAIN, "docket.domain.containment", "docket.domain.events", "docket.domain.reports"),
    "docket.projections": ("docket.projections", "docket.domain"),
    # the world, floor by floor: the event store, files and paths, processes and the sandbox, git, the workspaces
    # built of git; a hook's command (hooks.py) uses them all
    "docket.adapters.world": ("docket.adapters.world", "docket.domain"),
    "docket.adapters.world.faults": ("docket.domain",),
    "docket.adapters.world.clock": ("docket.domain",),
    "docket.adapters.world.ledger": (*_WORLD, "docket.adapters.world.ledger", "docket.domain"),
    "docket.adapters.world.files": (*_WORLD, "docket.adapters.world.ledger", "docket.adapters.world.files",
                                    "docket.domain"),
    "docket.adapters.world.processes": (*_WORLD, "docket.adapters.world.files", "docket.adapters.world.processes",
                                        "docket.domain"),
    "docket.adapters.world.git": (*_WORLD, "docket.adapters.world.ledger", "docket.adapters.world.files",
                                  "docket.adapters.world.processes", "docket.adapters.world.git", "docket.domain"),
    "docket.adapters.world.workspaces": ("docket.adapters.world", "docket.domain"),
    "docket.adapters.world.hooks": ("docket.adapters.world", "docket.domain"),
    # the service layer: the ledger kernel (the ledger application, the effector, the ports, the views), the use
    # cases by concept over it, and docket go over both
    "docket.adapters.service_layer": ("docket.adapters.service_layer", "docket.adapters.world", "docket.domain",
                                      "docket.projections"),
    "docket.adapters.service_layer.kernel": (*_LEDGER_KERNEL, "docket.adapters.world", "docket.domain",
                                             "docket.projections"),
    # the merge queue is built on the other use cases (a candidate queued, checked, confirmed), never under them
    "docket.adapters.service_layer.use_cases": (*_LEDGER_KERNEL, "docket.adapters.service_layer.use_cases",
                                                "docket.adapters.world", "docket.domain", "docket.projections"),
    "docket.adapters.service_layer.merge_queue": (*_LEDGER_KERNEL, "docket.adapters.service_layer.use_cases",
                                                  "docket.adapters.service_layer.merge_queue",
                                                  "docket.adapters.world", "docket.domain", "docket.projections"),
    "docket.adapters.service_layer.go": ("docket.adapters.service_layer", "docket.adapters.world", "docket.domain",
                                         "docket.projections"),
    # the CLI's rooms: what every command shares, then the commands by who uses them, the web view on top
    "docket.cli": ("docket.cli", "docket.adapters", "docket.domain", "docket.projections", "docket"),
    "docket.cli.console": ("docket.cli.console", *_BELOW_CLI),
    "docket.cli.steps": ("docket.cli.console", "docket.cli.steps", *_BELOW_CLI),
    "docket.cli.audit": ("docket.cli.console", "docket.cli.steps", "docket.cli.audit", *_BELOW_CLI),
    "docket.cli.supervise": ("docket.cli.console", "docket.cli.steps", "docket.cli.supervise", *_BELOW_CLI),
    "docket.cli.web": ("docket.cli.console", "docket.cli.steps", "docket.cli.supervise", "docket.cli.web",
                       *_BELOW_CLI),
}
# where the layer a module belongs to is a single module, the module itself is the layer (world/hooks.py)


def _modules():
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "_root" in path.parts:
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            yield path, name, path.name == "__init__.py"


def _imports(path: Path, module: str, is_package: bool):
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" for a in node.names] if not node.module or node.level else [target]
            yield from (n for n in names if n.startswith("docket"))
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("docket"))


def test_every_module_imports_only_inward():
    wrong = []
    checked = 0
    for path, module, is_package in _modules():
        layer = max((layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")), key=len,
                    default=None)
        if layer is None:
            continue  # docket.adapters itself (an empty package)
        checked += 1
        for target in _imports(path, module, is_package):
            if not any(target == p or target.startswith(p + ".") for p in ALLOWED[layer]):
                wrong.append(f"{module} imports {target}")
    assert checked > 50
    assert wrong == []


def test_the_check_sees_a_wrong_way_import(tmp_path):
    bad = tmp_path / "store.py"
    bad.write_text("from ..service_layer.runs import open_run\nfrom ...cli.app import main\n")
    found = list(_imports(bad, "docket.adapters.world.store", False))
    assert found == ["docket.adapters.service_layer.runs.open_run", "docket.cli.app.main"]


# Packages checked for import circles (a module importing, at any depth and even inside a function, a module that
# imports it back): all of docket.
ACYCLIC = ("docket.domain", "docket.projections", "docket.adapters.world", "docket.adapters.service_layer",
           "docket.cli")


def _import_graph() -> dict[str, set[str]]:
    """module -> the docket modules it imports (an imported name resolved to the module that defines it)."""
    found = {name: (path, is_package) for path, name, is_package in _modules()}
    graph = {}
    for name, (path, is_package) in found.items():
        targets = set()
        for target in _imports(path, name, is_package):
            while target and target not in found:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circles():
    graph = _import_graph()
    inside = {m: {t for t in ts if t.startswith(ACYCLIC)} for m, ts in graph.items() if m.startswith(ACYCLIC)}
    assert len(inside) > 50
    assert _circles(inside) == []


def test_the_check_sees_an_import_circle(tmp_path):
    (tmp_path / "git.py").write_text("def helper(): ...\nfrom .inventory import listing\n")
    (tmp_path / "inventory.py").write_text("from .git import helper\ndef listing(): ...\n")
    graph = {}
    for module in ("git", "inventory"):
        graph[f"docket.adapters.world.{module}"] = {
            t.rpartition(".")[0] for t in _imports(tmp_path / f"{module}.py", f"docket.adapters.world.{module}", False)}
    assert _circles(graph) == [["docket.adapters.world.git", "docket.adapters.world.inventory"]]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


# The stores translate their database's errors (StorageFailed): the layers above never name the driver.
DRIVER_FREE = ("docket.adapters.service_layer", "docket.cli")
DRIVERS = ("sqlite3",)


def _drivers_imported(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        found += [name for name in names if name.split(".")[0] in DRIVERS]
    return found


def test_the_service_layer_and_the_cli_never_import_the_database_driver():
    wrong = []
    checked = 0
    for path, module, _ in _modules():
        if any(module == layer or module.startswith(layer + ".") for layer in DRIVER_FREE):
            checked += 1
            wrong += [f"{module} imports {name}" for name in _drivers_imported(path)]
    assert checked > 50
    assert wrong == []


def test_the_check_sees_a_driver_import(tmp_path):
    bad = tmp_path / "views.py"
    bad.write_text("import os, sqlite3\n\ndef f():\n    from sqlite3 import Error\n")
    assert _drivers_imported(bad) == ["sqlite3", "sqlite3"]


# docs/architecture.md is the map a newcomer reads first: it names every module of the four code folders, and
# every path it names exists, so a module added, moved or renamed without the map fails here.
def _map_paths() -> set[str]:
    import re

    return set(re.findall(r"`([\w./-]+/[\w.-]+\.py)", (ROOT / "docs" / "architecture.md").read_text()))


def test_the_map_names_every_module_and_only_paths_that_exist():
    named = _map_paths()
    modules = {str(path.relative_to(ROOT)) for folder in PACKAGES for path in (ROOT / folder).rglob("*.py")
               if path.name != "__init__.py" and "_root" not in path.parts}
    assert len(modules) > 100
    assert sorted(modules - named) == []  # name it in docs/architecture.md, where a newcomer looks for it
    assert sorted(n for n in named if not (ROOT / n).exists()) == []
