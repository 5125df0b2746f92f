"""The two worlds an integration test of a git port runs in: the real one (dulwich over the `repo` fixture's git
repository) and the fakes' (a FakeRepository standing for it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.repository import FakeRepository


class FakeMainWorld:
    """A FakeRepository standing for tmp_path/repo, its main branch at base."""

    def __init__(self, tmp_path: Path):
        self.common = tmp_path / "repo" / ".git"
        self.repository = FakeRepository()
        self.base = self.repository.point("main")
        self.repository.main_branch = "main"


def world_fixture(fake: Callable[[Path], object], real: Callable[[Path], object]):  # noqa: ANN201
    """The module's `world` fixture: each test taking it runs twice, over real(repo) and over fake(tmp_path)."""

    @pytest.fixture(name="world", params=["dulwich", "fake"])
    def world(request: pytest.FixtureRequest, tmp_path: Path) -> object:
        if request.param == "fake":
            return fake(tmp_path)
        return real(request.getfixturevalue("repo"))

    return world
