"""Two hosts for tests of several machines: two clones of one bare remote ([git] remote = "origin"), one PostgreSQL
ledger, DOCKET_HOST alpha and beta, each its own data folder."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import TASKS, GoWorld, make_go_world


def make_fleet(tmp_path: Path, postgres_url: str, *, config: str | None = None,
               tasks: str = TASKS) -> tuple[GoWorld, GoWorld, Path]:
    """(alpha, beta, the bare remote); config: the docket.toml both clones get (default: the go world's, with the
    shared remote)."""
    seed = make_go_world(tmp_path, name="seed", extra_config='\n[git]\nremote = "origin"\n', idle_timeout="10m")
    if config is not None:
        (seed.repo / "docket.toml").write_text(config)
        git(seed.repo, "commit", "-q", "-am", "the fleet's config")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed.repo), str(remote))
    hosts = []
    for name in ("alpha", "beta"):
        clone = tmp_path / name
        git(tmp_path, "clone", "-q", str(remote), str(clone))
        (clone / "tasks.toml").write_text(tasks)
        env = {k: v for k, v in seed.env.items() if not k.startswith("DOCKET_")}
        env.update(DOCKET_DATABASE_URL=postgres_url, DOCKET_HOST=name, XDG_DATA_HOME=str(tmp_path / f"{name}-data"),
                   # leases of 20 s, not a minute: a takeover is waited out in a third of the time (renewed every
                   # 7 s, so a loaded machine does not lose one by a late renewal)
                   DOCKET_TESTING="1", DOCKET_LEASE_TTL_MS="20000")
        hosts.append(GoWorld(clone, env))
    alpha, beta = hosts
    assert alpha.run("init").returncode == 0
    joined = beta.run("init", "--join", "--json")
    assert joined.returncode == 0, joined.stderr
    assert json.loads(joined.stdout)["repository_id"] == json.loads(alpha.run("init", "--json").stdout)[
        "repository_id"]
    return alpha, beta, remote
