"""docket's models are validated by pydantic alone: third-party pydantic plugins are not loaded.

pydantic looks for plugins (the ``pydantic`` entry-point group of every
installed distribution) when it builds a model's first validator, and hands
each plugin every input and result of every validation after that. For an audit
ledger that would let any distribution installed beside docket watch (and, by
changing the input it is handed, alter) what docket records, by declaring an
entry point and without anyone importing it: the events are valid because
docket's models say so, not because of what else is installed. Finding the
plugins also imports ``importlib.metadata`` (with ``email``, ``zipfile``,
``csv``) and reads every distribution's metadata, a sixth of a write command's
start.

So docket puts its own ``pydantic.plugin._loader`` in ``sys.modules`` before
pydantic first asks for it, one that finds no plugins. This is done in the
process, not by setting ``PYDANTIC_DISABLE_PLUGINS``: the environment docket
gives agents and checks stays as it was (a user's test suite may rely on its own
pydantic plugins). A process that loaded pydantic's plugin loader before
importing docket keeps it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any

__all__ = ["LOADER", "install"]

LOADER = "pydantic.plugin._loader"


def get_plugins() -> Iterable[Any]:
    """What pydantic's validators consult (pydantic/plugin/_schema_validator.py): no plugins."""
    return ()


def install() -> bool:
    """Stand in for pydantic's plugin loader; False if the real one was loaded first (it stays)."""
    if LOADER in sys.modules:
        return sys.modules[LOADER].get_plugins is get_plugins
    loader = types.ModuleType(LOADER, "docket's stand-in for pydantic's plugin loader: no plugins (docket.pydantic_plugins)")
    loader.get_plugins = get_plugins  # type: ignore[attr-defined]
    loader.PYDANTIC_ENTRY_POINT_GROUP = "pydantic"  # type: ignore[attr-defined]
    loader._plugins = {}  # type: ignore[attr-defined]
    loader._loading_plugins = False  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
    return True
