import ast
import pathlib

import pytest
from pydantic import ValidationError

from docket.domain import events as ev
from docket.domain.effects import BranchObservation, Unknown, decide_base_pin
from docket.domain.kernel.errors import BadInput
from docket.domain.kernel.values import format_duration, from_ms, parse_duration, parse_time, to_ms

from .builders import T0, Book


@pytest.mark.parametrize("text, ms", [("90m", 5_400_000), ("1h30m", 5_400_000), ("45s", 45_000),
                                      ("250ms", 250), ("2d", 172_800_000)])
def test_durations(text, ms):
    assert parse_duration(text) == ms
    assert parse_duration(format_duration(ms)) == ms


@pytest.mark.parametrize("bad", ["", "5", "1.5h", "h", "0s", "-5m", "5 m"])
def test_bad_durations(bad):
    with pytest.raises(BadInput) as e:
        parse_duration(bad)
    assert e.value.code == "bad-duration"


def test_times_round_trip_in_utc():
    assert from_ms(to_ms(T0)) == T0
    assert parse_time("2026-01-01T01:00:00+01:00") == T0
    with pytest.raises(BadInput):
        parse_time("2026-01-01T00:00:00")  # no offset


def test_events_are_frozen_strict_and_closed():
    e = ev.RunResumed(stream="run:r", version=2, recorded_at=T0, run_id="r")
    with pytest.raises(ValidationError):
        e.run_id = "other"  # frozen
    with pytest.raises(ValidationError):
        ev.RunResumed(stream="run:r", version=2, recorded_at=T0, run_id="r", extra=1)
    with pytest.raises(ValidationError):
        ev.LeaseGranted(stream="l", version=1, recorded_at=T0, resource="x", run_id="r", worker_id="w",
                        generation=1, ttl_ms=1.5, expires_at=T0, supersedes_token=None)
    with pytest.raises(ValidationError):
        ev.RunResumed(stream="run:r", version=2, recorded_at="yesterday", run_id="r")


def test_type_names_are_fixed_and_unique():
    names = [cls.type_name() for cls in ev.EVENT_TYPES.values()]
    assert len(set(names)) == len(names)
    assert all(n == f"{cls.name}.v{cls.schema_version}" for n, cls in ev.EVENT_TYPES.items())
    # a new version of an event is a new class beside the old one, which still decodes old ledgers
    assert {"LedgerCreated.v1", "LedgerCreated.v2", "IntentOutcomeUnknown.v1", "IntentOutcomeUnknown.v2"} <= set(names)
    for required in ["WorkerRegistered", "LeaseGranted"]:
        assert f"{required}.v1" in ev.EVENT_TYPES


def test_base_pin_decision():
    book = Book()
    from docket.domain import run
    r = book.apply(run.apply, None, run.open_run("r1", "i1", "g", "main", None, "/repo/.git", T0))
    intent = run.open_run("r1", "i1", "g", "main", None, "/repo/.git", T0)[1]
    assert isinstance(decide_base_pin(r, intent, BranchObservation("found", "b" * 40), T0), ev.RunBasePinned)
    failed = decide_base_pin(r, intent, BranchObservation("missing"), T0)
    assert isinstance(failed, ev.RunBasePinFailed) and failed.code == "unknown-branch"
    assert decide_base_pin(r, intent, BranchObservation("unreadable", detail="x"), T0) == Unknown("x")
    not_commit = decide_base_pin(r, intent, BranchObservation("not-a-commit", detail="refs/heads/main names a blob"), T0)
    assert isinstance(not_commit, ev.RunBasePinFailed) and not_commit.code == "branch-not-a-commit"


ALLOWED = {"__future__", "dataclasses", "typing", "re", "hashlib", "json", "datetime", "decimal", "collections", "pydantic",
           "eventsourcing", "posixpath", "shlex", "unicodedata", "types", "functools", "base64", "enum",
           "xml",  # expat only, parsing bytes handed in (domain.junit)
           "ipaddress"}  # parsing and comparing addresses handed in (domain.egress); it resolves nothing


def test_domain_imports_nothing_of_the_world():
    domain = pathlib.Path(ev.__file__).parent.parent
    paths = sorted(domain.rglob("*.py"))
    assert domain / "events" / "base.py" in paths  # sub-packages are checked too
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                mods = [node.module]
            else:
                continue
            for mod in mods:
                assert mod.split(".")[0] in ALLOWED, f"{path.name} imports {mod}"
                if mod.startswith("xml"):
                    assert mod == "xml.parsers", f"{path.name} imports {mod}"
                if mod.startswith("eventsourcing"):
                    assert mod == "eventsourcing.domain", f"{path.name} imports {mod}"
