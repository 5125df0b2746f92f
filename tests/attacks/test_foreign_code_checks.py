"""A check never gets docket's own environment: docket's secrets stay out of it unless env_allow lets one through
(the same scrubbing an agent's environment gets), and no DOCKET_ variable of docket's own reaches it."""

from __future__ import annotations

from tests.e2e.go_world import make_go_world

SECRET = "sk-live0123456789abcdefghijABCDEFGHIJ"
ALLOWED = "ghp_0123456789abcdefghijABCDEFGHIJ012345"

ONE = '''\
[[tasks]]
id = "greet"
title = "greet"
prompt = "write greet.py: print('hello')"
'''


def test_a_check_gets_the_scrubbed_environment_and_only_what_env_allow_names(tmp_path):
    world = make_go_world(tmp_path, tasks=ONE, extra_config='''
[checks.environment]
command = ["env"]
env_allow = ["DEPLOY_TOKEN"]
timeout = "1m"
''')
    world.env.update(OPENAI_API_KEY=SECRET, ACME_SERVICE_PASSWORD="hunter2", INNOCENT_LOOKING=SECRET,
                     DEPLOY_TOKEN=ALLOWED, DOCKET_FAULT_PLAN="none")
    done = world.go("env1")
    assert done.returncode == 0, done.stdout + done.stderr
    logs = sorted((world.repo / ".git" / "docket" / "checks").glob("*/environment-*.log"))
    assert logs, "the check left no log"
    for log in logs:
        seen = dict(line.split("=", 1) for line in log.read_text().splitlines() if "=" in line)
        assert SECRET not in log.read_text() and "hunter2" not in log.read_text()
        assert {"OPENAI_API_KEY", "ACME_SERVICE_PASSWORD", "INNOCENT_LOOKING", "DOCKET_FAULT_PLAN"}.isdisjoint(seen)
        assert seen["DEPLOY_TOKEN"] == ALLOWED  # let through by name
        assert seen["DOCKET_RUN"] == "env1"  # docket's own, set for the check
    assert world.file_at("main", "greet.py") == "print('hello')\n"
