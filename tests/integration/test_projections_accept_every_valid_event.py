"""Issue 5 item 2: an event that passed validation must always project.

Events are in the append-only chain for good, so a handler that fails on one
fails every later command. Hypothesis builds arbitrary schema-valid events of
every type in EVENT_TYPES, straight from each model's fields (so new event types
are covered as soon as they are registered), stores them through the ledger's
mapper, and projects them in arbitrary order. Nothing may raise, and projecting
the same events twice gives the same rows.
"""

from __future__ import annotations

import re
import types
import typing
from functools import cache

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from docket.adapters.service_layer.kernel.projector import open_views
from docket.adapters.world.ledger.store import CanonicalMapper
from docket.domain.events import EVENT_TYPES, Event
from docket.domain.kernel.values import LATEST_TIME, MAX_SAFE_INT, from_ms, to_ms
from docket.projections import runs
from docket.projections.views import READ_MODELS

# Names that many events share, so that events about the same run, worker or
# resource meet (duplicates, updates of missing rows, out-of-order lifecycles).
SHARED_STRINGS = ("a", "b", "/repo/.git")


def _constraints(metadata: typing.Iterable[object]) -> dict[str, object]:
    """ge/gt/le/lt/pattern/min_length/max_length from Field() and StringConstraints metadata."""
    found: dict[str, object] = {}
    for m in metadata:
        for inner in [m, *getattr(m, "metadata", [])]:  # a Field() holds its constraints in .metadata
            for key in ("ge", "gt", "le", "lt", "pattern", "min_length", "max_length"):
                if getattr(inner, key, None) is not None:
                    found.setdefault(key, getattr(inner, key))
    return found


def _valid(annotation: object) -> typing.Callable[[object], bool]:
    adapter = TypeAdapter(annotation)

    def check(value: object) -> bool:
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError:
            return False
        return True

    return check


def strategy_for(annotation: object, metadata: tuple[object, ...] = ()) -> st.SearchStrategy:
    """Values of one field's type: generic over Annotated, Optional, Literal, int, bool and str."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return strategy_for(inner, (*metadata, *extra)).filter(_valid(annotation))
    if origin in (typing.Union, types.UnionType):
        return st.one_of([strategy_for(arm, metadata) for arm in typing.get_args(annotation)])
    if origin is typing.Literal:
        return st.sampled_from(typing.get_args(annotation))
    if annotation is type(None):
        return st.none()
    if annotation is bool:
        return st.booleans()
    c = _constraints(metadata)
    if annotation is int:
        low = c["ge"] if "ge" in c else c["gt"] + 1 if "gt" in c else -MAX_SAFE_INT
        high = c["le"] if "le" in c else c["lt"] - 1 if "lt" in c else MAX_SAFE_INT
        return st.one_of(st.integers(low, high), st.sampled_from([low, high]))
    if annotation is str:
        return _string_strategy(c)
    if origin is list:
        (item,) = typing.get_args(annotation)
        least = c.get("min_length", 0)  # drawn, not filtered: a list that must not be empty is rarely drawn so
        return st.lists(strategy_for(item), min_size=least, max_size=max(least, min(3, c.get("max_length", 3))))
    if origin is dict:  # a JSON object (a receipt): canonical JSON values, no floats
        leaves = st.one_of(st.none(), st.booleans(), st.integers(-MAX_SAFE_INT, MAX_SAFE_INT), st.text(max_size=8))
        values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                              | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
        return st.dictionaries(st.text(max_size=8), values, max_size=3)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):  # a nested record, given as a dict
        return st.fixed_dictionaries({name: strategy_for(f.annotation, tuple(f.metadata))
                                      for name, f in annotation.model_fields.items()})
    raise NotImplementedError(f"no strategy for {annotation!r}: extend strategy_for")


def _string_strategy(c: dict[str, object]) -> st.SearchStrategy:
    low, high = c.get("min_length", 0), c.get("max_length", 4000)
    pattern = c.get("pattern")
    if pattern == _TIMESTAMP_PATTERN:
        # Most strings of the timestamp pattern are impossible dates: draw real times instead.
        return st.integers(0, to_ms(LATEST_TIME)).map(from_ms)
    if pattern:
        generated = st.from_regex(re.compile(pattern), fullmatch=True)
    else:
        generated = st.text(max_size=high)
    # only the shared names the pattern allows: an event with many patterned fields is otherwise rarely valid
    shared = [s for s in SHARED_STRINGS if not pattern or re.fullmatch(pattern, s)]
    fits = st.one_of(st.sampled_from(shared), generated) if shared else generated
    return fits.filter(lambda s: low <= len(s) <= high)


_TIMESTAMP_PATTERN = _constraints(Event.model_fields["recorded_at"].metadata)["pattern"]


@cache
def event_strategy(cls: type[Event]) -> st.SearchStrategy[Event]:
    fields = {name: strategy_for(f.annotation, tuple(f.metadata)) for name, f in cls.model_fields.items()}

    def build(values: dict[str, object]) -> Event:
        try:
            return cls.model_validate(values)
        except ValidationError:  # a combination the model refuses (a cross-field rule): not a valid event
            assume(False)
            raise

    return st.fixed_dictionaries(fields).map(build)


any_event = st.sampled_from(sorted(EVENT_TYPES.values(), key=lambda cls: cls.type_name())).flatmap(event_strategy)


def project(rows: list[tuple[int, str, int, str, bytes]]) -> dict[str, list[tuple]]:
    views = open_views(":memory:")
    try:
        views.apply(rows, lambda position: "0" * 64)
        for row in runs.list_runs(views.conn):
            runs.with_budget(row, LATEST_TIME)
        return {m.TABLE: views.table_rows(m.TABLE) for m in READ_MODELS}
    finally:
        views.conn.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(events=st.lists(any_event, max_size=25), gaps=st.lists(st.integers(1, 1000), min_size=25, max_size=25))
def test_every_schema_valid_event_projects_in_any_order(events, gaps):
    mapper = CanonicalMapper()
    rows, position = [], 0
    for event, gap in zip(events, gaps):
        position += gap
        stored = mapper.to_stored_event(event)
        assert mapper.to_domain_event(stored) == event  # what is stored decodes to the same event
        rows.append((position, stored.originator_id, stored.originator_version, stored.topic, stored.state))
    assert project(rows) == project(rows)


@pytest.mark.parametrize("cls", EVENT_TYPES.values(), ids=lambda cls: cls.type_name())
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_each_event_type_is_generated_and_projects(cls, data):
    stored = CanonicalMapper().to_stored_event(data.draw(event_strategy(cls)))
    project([(1, stored.originator_id, stored.originator_version, stored.topic, stored.state)])
