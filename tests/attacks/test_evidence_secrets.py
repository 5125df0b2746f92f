"""Secrets an agent, a check or a hook prints never reach what docket keeps.

A hostile agent prints a password said in words, a bare AWS secret access key and the value of a variable docket
withheld from it (as if read from its parent's /proc/PID/environ); a check and a hook print a value env_allow let
through to them. None of it reaches WorkerExited, the task's feedback, the ledger file's bytes or the exported
bundle, and the honest work of the same run is delivered.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import make_go_world

WITHHELD = "withheld-value-7Hq2-kept-from-the-agent"  # in MY_SERVICE_API_KEY: scrubbed from the agent
ALLOWED = "allowed-value-for-the-check-and-the-hook"  # in DEPLOY_TOKEN: let through to the check and hook
AWS_SECRET = "q8Zr3Kt0bV+y7LmW2pXc9NfA1sDe4Gh6Jk5Tu/Ro"
PASSWORD = "hunter2"
SECRETS = (WITHHELD, ALLOWED, AWS_SECRET, PASSWORD)

# Fails its first generation (so its output becomes feedback), then does the honest work.
AGENT = f'''\
import sys
prompt = open(sys.argv[1]).read()
print("the password is {PASSWORD}")
print("{AWS_SECRET}")
print("stolen: {WITHHELD}")
if "Your previous attempt" not in prompt:
    sys.exit(1)
open("honest.txt", "w").write("honest work\\n")
'''

TASKS = '[[tasks]]\nid = "t"\ntitle = "honest work"\nprompt = "write honest.txt"\n'


def test_printed_secrets_are_redacted_everywhere_docket_keeps_output(tmp_path: Path):
    agent = tmp_path / "hostile_agent.py"
    agent.write_text(AGENT)
    config = f'''\
agent = "hostile"

[agents.hostile]
command = ["{sys.executable}", "{agent}", "{{prompt_file}}"]
prompt = "file"

[checks.present]
command = ["echo token is $DEPLOY_TOKEN; echo the password is {PASSWORD}; test -f honest.txt"]
shell = true
env_allow = ["DEPLOY_TOKEN"]

[hooks]
task-finished = {{ command = ["sh", "-c", "echo hook sees $DEPLOY_TOKEN"], env_allow = ["DEPLOY_TOKEN"] }}
'''
    world = make_go_world(tmp_path, tasks=TASKS)
    (world.repo / "docket.toml").write_text(config)
    git(world.repo, "commit", "-qam", "hostile agent")
    world.env.update(MY_SERVICE_API_KEY=WITHHELD, DEPLOY_TOKEN=ALLOWED)
    keys = tmp_path / "keys" / "docket"
    keys.parent.mkdir()
    assert world.run("key", "generate", "--out", str(keys)).returncode == 0

    done = world.go("r1", "--target", "main", "--key", f"{keys}.key")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "delivered"
    assert world.file_at("main", "honest.txt") == "honest work\n"  # the honest work landed

    exited = world.events("WorkerExited")
    assert len(exited) == 2 and all("[redacted]" in e["payload"]["tail"] for e in exited)
    feedback = world.events("TaskFeedbackRecorded")
    assert len(feedback) == 1 and "[redacted]" in feedback[0]["payload"]["feedback"]
    check_tails = [e["payload"]["tail"] for e in world.events("CheckPassed")]
    assert check_tails and all("token is [redacted]" in tail for tail in check_tails)
    hook_tails = [e["payload"]["tail"] for e in world.events("HookFinished")]
    assert hook_tails and all(tail == "hook sees [redacted]" for tail in hook_tails)

    kept = [world.ledger, *world.ledger.parent.glob("ledger.sqlite-*"), Path(summary["receipt"]["path"])]
    everything = b"".join(path.read_bytes() for path in kept if path.exists())
    everything += world.run("log", "--json").stdout.encode()
    for secret in SECRETS:
        assert secret.encode() not in everything, secret
    assert world.run("verify-receipt", summary["receipt"]["path"], "--key", f"{keys}.pub").returncode == 0


CONFLICTING = '''\
[[tasks]]
id = "t1"
title = "one"
prompt = "append notes.txt: one"

[[tasks]]
id = "t2"
title = "two"
prompt = "append notes.txt: leaked WITHHELD"
'''.replace("WITHHELD", WITHHELD)


def test_a_secret_written_into_a_conflicting_file_is_redacted_from_the_conflict_feedback(tmp_path: Path):
    world = make_go_world(tmp_path, tasks=CONFLICTING, extra_config='\n[checks.ok]\ncommand = ["true"]\n')
    (world.repo / "notes.txt").write_text("notes\n")
    (world.repo / "m.py").write_text("x = 1\n")  # for the world's compiles check
    git(world.repo, "add", "notes.txt", "m.py")
    git(world.repo, "commit", "-q", "-m", "notes")
    world.env.update(MY_SERVICE_API_KEY=WITHHELD)
    done = world.run("go", "--goal", "two", "--tasks", "tasks.toml", "--target", "main", "--id", "q1", "--parallel",
                     "1", "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert world.file_at("main", "notes.txt") == f"notes\none\nleaked {WITHHELD}\n"  # the work is the repository's
    feedback = [e["payload"]["feedback"] for e in world.events("TaskFeedbackRecorded")]
    assert len(feedback) == 1 and "+leaked [redacted]" in feedback[0], feedback
    kept = b"".join(p.read_bytes() for p in [world.ledger, *world.ledger.parent.glob("ledger.sqlite-*")]
                    if p.exists())
    assert WITHHELD.encode() not in kept
