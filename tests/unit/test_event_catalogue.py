"""The lazy event catalogue (domain/events/__init__.py): its tables agree with the modules they name."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from docket.adapters.service_layer.kernel.aggregates import AGGREGATES, aggregate_of, state_class_of
from docket.domain import events as ev
from docket.domain.events.base import Event

MODULES = sorted(ev._EXPORTS)


def _event_classes_defined_in(module_name: str) -> set[str]:
    module = __import__(f"docket.domain.events.{module_name}", fromlist=["_"])
    return {name for name, obj in vars(module).items()
            if inspect.isclass(obj) and issubclass(obj, Event) and obj is not Event and not name.startswith("_")
            and obj.__module__ == module.__name__}


@pytest.mark.parametrize("module", MODULES)
def test_every_event_class_of_a_module_is_in_the_catalogue_under_that_module(module):
    defined = _event_classes_defined_in(module)
    assert defined <= set(ev._CATALOGUE)
    assert defined <= set(ev._EXPORTS[module])


def test_every_name_the_tables_give_resolves_to_an_object_of_its_module():
    for module, names in ev._EXPORTS.items():
        for name in names:
            assert getattr(ev, name).__module__ == f"docket.domain.events.{module}", name


def test_stored_names_and_event_class_agree_with_the_classes():
    assert len(ev.EVENT_TYPES) == len(ev._CATALOGUE)
    for type_name, cls in ev.EVENT_TYPES.items():
        assert getattr(ev.stored, cls.__name__) == type_name
        assert ev.event_class(type_name) is cls


def test_unknown_names_are_refused():
    with pytest.raises(KeyError, match="unknown event type"):
        ev.event_class("NoSuchEvent.v1")
    with pytest.raises(KeyError):
        ev.event_class("TaskPlanned.v9")
    with pytest.raises(AttributeError):
        ev.stored.NoSuchEvent
    with pytest.raises(AttributeError):
        ev.NoSuchEvent  # noqa: B018


def test_the_views_name_only_event_types_that_exist():
    from docket.projections.views import _handlers

    assert set(_handlers()) <= set(ev.EVENT_TYPES)


def test_each_aggregate_is_found_by_its_prefix_and_its_fold():
    for prefix in AGGREGATES:
        fold, cls = aggregate_of(prefix)
        assert state_class_of(fold) is cls
    assert aggregate_of("nothing") is None
    assert state_class_of(lambda state, event, position: state) is None


def test_importing_the_catalogue_imports_none_of_its_modules():
    probe = ("import sys; import docket.domain.events as ev; "
             "print(sorted(m for m in sys.modules if m.startswith('docket.domain.events.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_model_of_the_events_defers_its_validator_to_first_use():
    """A model built at import costs a write command its validator (PlannedTask and ExportKey did: about 15 ms)."""
    from pydantic import BaseModel

    from docket.domain.containment import sandbox

    modules = [__import__(f"docket.domain.events.{m}", fromlist=["_"]) for m in MODULES] + [sandbox]
    models = [obj for module in modules for obj in vars(module).values()
              if inspect.isclass(obj) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__]
    assert len(models) > len(ev._CATALOGUE)
    assert [m.__name__ for m in models if not m.model_config.get("defer_build")] == []


def test_each_event_types_role_is_known_without_importing_it():
    for type_name, cls in ev.EVENT_TYPES.items():
        assert ev.role_of(type_name) == cls.effect_role, type_name
    assert ev.role_of("NoSuchEvent.v1") is None
