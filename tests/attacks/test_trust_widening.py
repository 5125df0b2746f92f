"""A repository's docket.toml never widens a sandbox on its own word: what widens one (read and write extras,
env_allow, a network beyond the default, hooks, [inbox] trusted, sandbox = "off") is honoured only for a docket.toml
its user trusts, by digest, in a file outside every repository (docket config trust). The attack: an agent's
change to docket.toml that reached main (a person approved it, or it came another way) hands the next run's agent
the user's secrets. It is refused until the user trusts that very file again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import GoWorld, make_go_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> GoWorld:
    tmp_path = tmp_path_factory.mktemp("widening")
    world = make_go_world(tmp_path)
    world.env["XDG_CONFIG_HOME"] = str(tmp_path / "own-config")  # this user has trusted nothing yet
    return world


def _widen(world: GoWorld, line: str) -> str:
    config = (world.repo / "docket.toml").read_text()
    config = config.replace("[agents.scripted]\n", f"[agents.scripted]\n{line}\n", 1)
    (world.repo / "docket.toml").write_text(config)
    git(world.repo, "commit", "-q", "-am", f"widen: {line}")
    return config


def test_a_docket_toml_that_widens_nothing_needs_no_trust(world):
    shown = world.json("config", "show")
    assert shown["widens"] == [] and shown["trusted"] is None
    assert world.go("plain").returncode == 0


def test_a_widening_docket_toml_is_refused_until_its_user_trusts_that_very_file(world):
    _widen(world, 'read = ["~/.ssh", "~/.config/docket"]')
    shown = world.json("config", "show")
    assert shown["widens"] == ["[agents.scripted] read"] and shown["trusted"] is False
    refused = world.go("widened")
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.startswith("docket: error: config-untrusted: ") and "docket config trust" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert all(e["payload"]["run_id"] != "widened" for e in world.events("RunOpened"))  # nothing started

    trusted = world.json("config", "trust")
    assert trusted["added"] is True and trusted["widens"] == ["[agents.scripted] read"]
    trust_file = Path(trusted["trust_file"])
    assert trust_file.is_relative_to(Path(world.env["XDG_CONFIG_HOME"])) and trust_file.stat().st_mode & 0o077 == 0
    assert world.json("config", "trust")["added"] is False  # once
    assert world.json("config", "show")["trusted"] is True
    started = world.go("widened")  # the work was delivered by the first run: it ends "no-changes", but it ran
    assert "config-untrusted" not in started.stderr and any(
        e["payload"]["run_id"] == "widened" for e in world.events("RunOpened")), started.stderr

    # the file changes (an agent's edit that reached main): refused again, whatever was trusted before
    _widen(world, 'env_allow = ["AWS_*"]')
    again = world.go("changed")
    assert again.returncode == 3 and "config-untrusted" in again.stderr and "env_allow" in again.stderr


def test_the_trust_file_is_never_followed_through_a_link_nor_read_when_malformed(world, tmp_path):
    home = Path(world.env["XDG_CONFIG_HOME"]) / "docket"
    home.mkdir(parents=True, exist_ok=True)  # (the tests of this module may run in any order, on any worker)
    if not world.json("config", "show")["widens"]:  # the trust file is read for a docket.toml that widens
        _widen(world, 'read = ["~/.ssh"]')
    saved = (home / "trust.toml").read_bytes() if (home / "trust.toml").exists() else None
    try:
        (home / "trust.toml").unlink(missing_ok=True)
        (home / "trust.toml").symlink_to(tmp_path / "elsewhere.toml")
        (tmp_path / "elsewhere.toml").write_text("any_repository = true\n")
        linked = world.go("linked")
        assert linked.returncode == 2 and "bad-trust-file" in linked.stderr, linked.stderr
        (home / "trust.toml").unlink()
        (home / "trust.toml").write_text("any_repository = 'yes'\n")
        bad = world.run("config", "trust", "--json")
        assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["code"] == "bad-trust-file"
    finally:
        (home / "trust.toml").unlink(missing_ok=True)
        if saved is not None:
            (home / "trust.toml").write_bytes(saved)
