"""Stream, table and event type names are spelled only by their owners.

Streams: domain/kernel/streams.py (each aggregate re-exports its own as ``stream_of``).
Tables: the read model that declares ``TABLE``. Event type names: the event
classes (``Cls.type_name()``). Anyone else asks the owner, so renaming a stream
or a table is one edit, and a typo cannot silently miss every event.
"""

from __future__ import annotations

import ast
import pathlib
import re

from docket.domain.kernel import streams
from docket.projections.views import EVENT_INDEXES, READ_MODELS

ROOT = pathlib.Path(__file__).resolve().parents[2]
CODE = ("domain", "projections", "adapters", "cli", "bench")
STREAM_PREFIXES = (streams.RUN_PREFIX, streams.TASK_PREFIX, streams.WORKER_PREFIX, streams.LEASE_PREFIX)
TYPE_NAME = re.compile(r"[A-Z][A-Za-z0-9]*\.v[0-9]+")
TABLE_OWNERS = {m.TABLE: pathlib.Path(m.__file__).resolve() for m in (*READ_MODELS, *EVENT_INDEXES)}
SQL_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE)\s+\[?(%s)\b" % "|".join(map(re.escape, TABLE_OWNERS)),
                       re.IGNORECASE)


def _strings(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal; an f-string's literal parts count as literals."""
    return sorted({(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(), str(path)))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)})


def _code_files():
    for folder in CODE:
        yield from sorted(p for p in (ROOT / folder).rglob("*.py") if ".work" not in p.parts)  # bench's scratch


def test_only_domain_streams_spells_a_stream_name():
    owner = (ROOT / "domain" / "kernel" / "streams.py").resolve()
    found = [f"{path.relative_to(ROOT)}:{line}: {text[:40]!r}"
             for path in _code_files() if path.resolve() != owner
             for line, text in _strings(path)
             if text.startswith(STREAM_PREFIXES)]
    assert found == []


def test_only_the_event_classes_spell_a_type_name():
    events = (ROOT / "domain" / "events").resolve()
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}"
             for path in _code_files() if events not in path.resolve().parents
             for line, text in _strings(path) if TYPE_NAME.fullmatch(text)]
    assert found == []


def test_only_a_read_model_names_its_table_in_sql():
    found = [f"{path.relative_to(ROOT)}:{line}: {match[1]}"
             for path in _code_files()
             for line, text in _strings(path)
             for match in SQL_TABLE.finditer(text) if TABLE_OWNERS[match[1].lower()] != path.resolve()]
    assert found == []
