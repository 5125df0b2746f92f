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
# what each layer may import of docket (prefixes)
ALLOWED = {
    "docket.domain": ("docket.domain",),
    "docket.projections": ("docket.projections", "docket.domain"),
    "docket.adapters.world": ("docket.adapters.world", "docket.domain"),
    "docket.adapters.service_layer": ("docket.adapters.service_layer", "docket.adapters.world", "docket.domain",
                                      "docket.projections"),
    "docket.cli": ("docket.cli", "docket.adapters", "docket.domain", "docket.projections", "docket"),
}


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
        layer = next((layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")), None)
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
    bad.write_text("from ..service_layer.services import open_run\nfrom ...cli.app import main\n")
    found = list(_imports(bad, "docket.adapters.world.store", False))
    assert found == ["docket.adapters.service_layer.services.open_run", "docket.cli.app.main"]


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
