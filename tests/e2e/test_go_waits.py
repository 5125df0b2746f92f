"""docket go into the branch the user's own checkout has out: untracked files out of the way of the delivered tree
stay and block nothing (git's rule); a run that cannot finish without the user (an untracked file where a task
writes, an approval) waits, with its own outcome and exit code, says what to do, and `docket go --resume` finishes
it once that is done."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import make_go_world

WAITING = 8
ONE_TASK = '[[tasks]]\nid = "greet"\ntitle = "greet"\nprompt = """write greet.py: print(\'hello\')\n"""\n'
DELIVERED = "print('hello')\n"


def untracked(repo: Path) -> dict[str, str]:
    return {path: (repo / path).read_text() for path in
            git(repo, "ls-files", "--others", "--exclude-standard").splitlines()}


def test_untracked_files_out_of_the_way_stay_and_the_checkout_moves_with_the_target(tmp_path: Path):
    """docket.toml as docket init leaves it (never committed), a tasks.toml and a .venv/ beside the delivered file."""
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    git(world.repo, "rm", "-q", "--cached", "docket.toml", ".gitignore")
    (world.repo / ".gitignore").unlink()
    git(world.repo, "commit", "-q", "-m", "docket.toml is the user's, not committed")
    for path in (".venv/bin/python", ".venv/lib/site.py", "notes/greet.txt"):
        (world.repo / path).parent.mkdir(parents=True, exist_ok=True)
        (world.repo / path).write_text(f"mine: {path}\n")
    mine = untracked(world.repo)
    assert set(mine) == {"docket.toml", "tasks.toml", ".venv/bin/python", ".venv/lib/site.py", "notes/greet.txt"}
    done = world.go("r1", "--target", "main")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary["status"]) == ("delivered", "completed")
    assert git(world.repo, "rev-parse", "HEAD") == summary["target_commit"]
    assert git(world.repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert (world.repo / "greet.py").read_text() == DELIVERED
    assert untracked(world.repo) == mine


def test_an_untracked_file_where_a_task_writes_makes_the_run_wait_until_the_user_moves_it(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=ONE_TASK)
    (world.repo / "greet.py").write_text("my own greeter\n")
    before = git(world.repo, "rev-parse", "HEAD")
    done = world.go("r1", "--target", "main")
    assert done.returncode == WAITING, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary["status"]) == ("waiting", "active")
    assert summary["tasks"][0]["result"] == "passed"
    waiting = summary["waiting"]
    assert waiting["code"] == "target-checked-out"
    assert "untracked greet.py" in waiting["message"] and "'docket go --resume r1'" in waiting["message"]
    assert (world.repo / "greet.py").read_text() == "my own greeter\n"  # nothing overwritten, nothing moved
    assert git(world.repo, "rev-parse", "HEAD") == git(world.repo, "rev-parse", "main") == before
    assert not world.events("ReceiptSealed")

    status = world.json("status", "r1")
    assert status["run"]["status"] == "active"
    run = status["run"]
    assert (run["waiting_code"], run["waiting_message"]) == (waiting["code"], waiting["message"])
    shown = world.run("status").stdout
    assert "r1               waiting " in shown and "untracked greet.py" in shown
    human = world.run("go", "--resume", "r1")  # still in the way: waits again, saying the same
    assert human.returncode == WAITING, human.stderr
    assert "run r1: waiting for you (active)" in human.stdout and "untracked greet.py" in human.stdout
    assert "docket go --resume r1" in human.stdout

    (world.repo / "greet.py").unlink()  # the user moves it away
    done = world.resume("r1")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["outcome"], summary.get("waiting")) == ("delivered", None)
    assert git(world.repo, "rev-parse", "HEAD") == summary["target_commit"] != before
    assert (world.repo / "greet.py").read_text() == DELIVERED
    assert world.json("status", "r1")["run"]["waiting_code"] is None
    assert len(world.events("RunWaiting")) == 2  # once per docket go that had to wait
    assert world.run("verify").returncode == 0


def test_a_run_awaiting_approval_waits_then_docket_approve_and_resume_deliver_it(tmp_path: Path):
    world = make_go_world(tmp_path, target="trunk", tasks=ONE_TASK, extra_config="[integration]\napproval = true\n")
    done = world.go("r1", "--target", "trunk")
    assert done.returncode == WAITING, done.stderr
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "waiting" and summary["waiting"]["code"] == "awaiting-approval"
    assert "'docket approve r1 --by NAME'" in summary["waiting"]["message"]
    assert "'docket go --resume r1'" in summary["waiting"]["message"]
    assert world.json("status", "r1")["run"]["waiting_message"] == summary["waiting"]["message"]
    approved = world.run("approve", "r1", "--by", "Ada")
    assert approved.returncode == 0, approved.stderr
    done = world.resume("r1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "delivered"
    assert world.file_at("trunk", "greet.py") == DELIVERED
