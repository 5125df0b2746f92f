"""The event catalogue's one table (``_REGISTRY`` in domain/events/__init__.py) agrees with the modules it names.

The modules are read with ``ast``, not imported: every class that derives from ``Event`` in domain/events/*.py is in
the table under its module with its ``effect_role``, and every name the table gives is defined in its module. The
imports a type checker reads (the block under ``TYPE_CHECKING``) are generated from the table; after changing the
table, regenerate them with ``python -m tests.unit.test_event_registry --write``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

EVENTS = Path(__file__).resolve().parents[2] / "domain" / "events"
INIT = EVENTS / "__init__.py"
BEGIN = ("# TYPE_CHECKING-IMPORTS (generated from _REGISTRY by `python -m tests.unit.test_event_registry --write`; "
         "do not edit)\n")
END = "# TYPE_CHECKING-IMPORTS END\n"


def _registry() -> dict[str, tuple[str, str | None]]:
    for node in ast.parse(INIT.read_text()).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "_REGISTRY":
            return ast.literal_eval(node.value)
    raise AssertionError("no _REGISTRY in domain/events/__init__.py")


def _classes() -> dict[str, tuple[str, list[str], str | None]]:
    """Every class of the event modules: its module, its bases' names, and the effect_role it sets itself."""
    classes: dict[str, tuple[str, list[str], str | None]] = {}
    for path in sorted(EVENTS.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            role = None
            for item in node.body:
                targets = (item.targets if isinstance(item, ast.Assign)
                           else [item.target] if isinstance(item, ast.AnnAssign) and item.value is not None else [])
                if any(isinstance(t, ast.Name) and t.id == "effect_role" for t in targets):
                    role = ast.literal_eval(item.value)  # type: ignore[union-attr]  # an Assign or valued AnnAssign
            bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
            assert node.name not in classes, f"{node.name} is defined twice in domain/events"
            classes[node.name] = (path.stem, bases, role)
    return classes


def _defined_names(module: str) -> set[str]:
    names = set()
    for node in ast.parse((EVENTS / f"{module}.py").read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _event_roles() -> dict[str, tuple[str, str]]:
    """Every public event class (what derives from Event): its module and its role."""
    classes = _classes()

    def chain(name: str) -> list[str]:
        """name and its ancestors among the modules' classes, nearest first (the first base first)."""
        if name not in classes:
            return []
        found = [name]
        for base in classes[name][1]:
            found += chain(base)
        return found

    roles = {}
    for name, (module, _bases, _role) in classes.items():
        ancestors = chain(name)
        if name == "Event" or name.startswith("_") or "Event" not in ancestors:  # _Request: a private base
            continue
        role = next((classes[a][2] for a in ancestors if classes[a][2] is not None), "fact")
        roles[name] = (module, role)
    return roles


def generated_imports(registry: dict[str, tuple[str, str | None]]) -> str:
    """The TYPE_CHECKING block: each name of the table imported from its module, re-exported (``X as X``)."""
    by_module: dict[str, list[str]] = {}
    for name, (module, _role) in registry.items():
        by_module.setdefault(module, []).append(name)
    lines = ["if TYPE_CHECKING:\n"]
    for module in sorted(by_module):
        lines.append(f"    from .{module} import (\n")
        lines += [f"        {name} as {name},\n" for name in sorted(by_module[module])]
        lines.append("    )\n")
    return "".join(lines)


def _current_block(text: str) -> str:
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the generated block's markers are missing"
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)]


def test_every_event_class_is_in_the_table_under_its_module_with_its_role():
    registry = _registry()
    events = _event_roles()
    in_table = {name: (module, role) for name, (module, role) in registry.items() if role is not None}
    assert in_table == events


def test_every_name_of_the_table_is_defined_in_its_module():
    for name, (module, _role) in _registry().items():
        assert name in _defined_names(module), f"{name} is not defined in domain/events/{module}.py"


def test_the_type_checkers_imports_are_generated_from_the_table():
    assert _current_block(INIT.read_text()) == generated_imports(_registry()), (
        "regenerate: python -m tests.unit.test_event_registry --write")


def write() -> None:
    text = INIT.read_text()
    block = _current_block(text)
    start = text.index(BEGIN) + len(BEGIN)
    INIT.write_text(text[:start] + generated_imports(_registry()) + text[start + len(block):])


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.unit.test_event_registry --write")
    write()
