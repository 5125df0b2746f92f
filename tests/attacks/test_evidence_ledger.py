"""A hostile agent, unsandboxed, attacks the ledger of the `docket go` that runs it: it deletes the file, swaps in
another repository's ledger, or edits an event and recomputes the chain with the documented formula. docket go
notices before it delivers: it refuses with the code that says what it found, the target does not move, and the
agent's honest work is kept (pinned) for a delivery once the ledger is restored."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import make_go_world, unsandboxed

TASKS = '[[tasks]]\nid = "t"\ntitle = "honest work"\nprompt = "write honest.txt"\n'

# The documented chain (DESIGN.md, docs/events.md), recomputed from the first edited position on.
AGENT = '''\
import os, shutil, sqlite3, sys
from docket.domain.kernel.chain import GENESIS_DIGEST, chain_entry, next_digest

ledger = os.environ["DOCKET_LEDGER"]
attack = sys.argv[2]  # argv[1]: the prompt's file, which it ignores
if attack == "delete":
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(ledger + suffix):
            os.unlink(ledger + suffix)
elif attack == "swap":
    shutil.copyfile(sys.argv[3], ledger + ".new")
    os.replace(ledger + ".new", ledger)
    for suffix in ("-wal", "-shm"):  # else SQLite applies this ledger's log to the other one
        if os.path.exists(ledger + suffix):
            os.unlink(ledger + suffix)
elif attack == "edit":
    db = sqlite3.connect(ledger, timeout=30)
    with db:
        rows = db.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                          "ORDER BY rowid").fetchall()
        digest = GENESIS_DIGEST
        for position, stream, version, topic, state in rows:
            if b"honest goal" in state:
                state = state.replace(b"honest goal", b"forged goal")
                db.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (state, position))
            digest = next_digest(digest, chain_entry(position, stream, version, topic, state))
            db.execute("UPDATE chain SET digest = ? WHERE position = ?", (digest, position))
    if len(sys.argv) > 3:  # and the views, which remember digests: rebuilt, they hold the forgery
        for suffix in ("", "-wal", "-shm"):
            views = os.path.join(os.path.dirname(ledger), "views.sqlite" + suffix)
            if os.path.exists(views):
                os.unlink(views)
open("honest.txt", "w").write("honest work\\n")
'''


def _world(tmp_path: Path, attack: str, *extra: str):
    agent = tmp_path / "tampering_agent.py"
    agent.write_text(AGENT)
    world = make_go_world(tmp_path, tasks=TASKS)
    config = (world.repo / "docket.toml").read_text()
    args = ", ".join(f'"{a}"' for a in (attack, *extra))
    config = config.replace('agent = "scripted"', 'agent = "tamper"', 1) + f'''
[agents.tamper]
command = ["{sys.executable}", "{agent}", "{{prompt_file}}", {args}]
prompt = "file"
'''
    config = config.replace("[checks.compiles]", "[checks.compiles]\nrequired = false", 1)
    (world.repo / "docket.toml").write_text(unsandboxed(config))
    git(world.repo, "commit", "-qam", "the tampering agent")
    return world


def _refused(world, code: str) -> None:
    main_before = git(world.repo, "rev-parse", "main")
    done = world.run("go", "--goal", "honest goal", "--tasks", "tasks.toml", "--id", "r1")
    assert done.returncode == 1, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    assert f"docket: error: {code}:" in done.stderr, done.stderr
    assert git(world.repo, "rev-parse", "main") == main_before  # the target did not move
    assert "honest.txt" not in git(world.repo, "ls-tree", "--name-only", "main")
    # the honest work is kept: its candidate is pinned under docket's refs
    pinned = git(world.repo, "for-each-ref", "--format=%(objectname)", "refs/docket/candidates/")
    assert pinned and any(git(world.repo, "show", f"{c}:honest.txt") == "honest work" for c in pinned.split())


def test_a_ledger_deleted_during_the_run_stops_the_delivery(tmp_path: Path):
    world = _world(tmp_path, "delete")
    _refused(world, "ledger-vanished")


def test_another_repositorys_ledger_swapped_in_stops_the_delivery(tmp_path: Path):
    other = make_go_world(tmp_path, name="other")
    assert other.run("go", "--goal", "other", "--tasks", "tasks.toml", "--id", "o1").returncode == 0
    stolen = tmp_path / "other-ledger.sqlite"
    assert other.run("verify").returncode == 0  # its run has ended: SQLite folded the log into the file
    shutil.copyfile(other.ledger, stolen)
    world = _world(tmp_path, "swap", str(stolen))
    _refused(world, "ledger-replaced")
    # and the swapped ledger is named for what it is
    verified = world.run("verify")
    assert "docket: warning: foreign-ledger: this ledger belongs to repository repo-" in verified.stderr


@pytest.mark.parametrize("views", [False, True], ids=["views-kept", "views-deleted-too"])
def test_an_event_edited_with_the_chain_recomputed_stops_the_delivery(tmp_path: Path, views: bool):
    world = _world(tmp_path, "edit", *(["and-views"] if views else []))
    _refused(world, "ledger-rewritten")
    # the forgery is consistent: verify alone could not tell, which is why docket go watches
    assert world.run("verify").returncode == 0
    assert any(e["payload"].get("goal") == "forged goal" for e in world.events("RunOpened"))
