"""docket's models are validated by pydantic alone: third-party pydantic plugins are not loaded.

pydantic looks for plugins (the ``pydantic`` entry-point group of every
installed distribution) when it builds a model's first validator, and hands
each plugin every input and result of every validation after that. For an audit
ledger that would let any distribution installed beside docket watch (and, by
changing the input it is handed, alter) what docket records, by declaring an
entry point and without anyone importing it: the events are valid because
docket's models say so, not because of what else is installed. Finding the
plugins also imports ``importlib.metadata`` (with ``email``, ``zipfile``,
``csv``) and reads every distribution's metadata: about 15 ms of a write command's
start.

So docket gives pydantic its own ``pydantic.plugin._loader``, one that finds no
plugins: a finder first on ``sys.meta_path`` answers for that one module name
when pydantic first imports it (until then nothing of it is loaded: ``docket
status``, which never imports pydantic, holds no pydantic module). This is done
in the process, not by setting ``PYDANTIC_DISABLE_PLUGINS``: the environment
docket gives agents and checks stays as it was (a user's test suite may rely on
its own pydantic plugins). It is installed when the docket command starts
(cli/app.py, main), not on import: a process that imports docket as a library, or
loaded pydantic's plugin loader before, keeps its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["LOADER", "install"]

LOADER = "pydantic.plugin._loader"


def get_plugins() -> Iterable[Any]:
    """What pydantic's validators consult (pydantic/plugin/_schema_validator.py): no plugins."""
    return ()


class _NoPlugins:
    """Finder and loader of the one module LOADER names: docket's stand-in."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        # the class itself is the loader (its methods are static): a Loader as importlib calls one
        return ModuleSpec(name, cast("Loader", _NoPlugins), origin=__file__) if name == LOADER else None

    @staticmethod
    def create_module(spec: ModuleSpec) -> None:
        return None  # the default module

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        module.get_plugins = get_plugins  # type: ignore[attr-defined]
        module.PYDANTIC_ENTRY_POINT_GROUP = "pydantic"  # type: ignore[attr-defined]
        module._plugins = {}  # type: ignore[attr-defined]
        module._loading_plugins = False  # type: ignore[attr-defined]


def install() -> None:
    """Answer for pydantic's plugin loader from now on (a loader already imported stays)."""
    if _NoPlugins not in sys.meta_path:
        sys.meta_path.insert(0, _NoPlugins)
