"""The web view in a real browser: the distribution's Chromium, driven by Playwright (no browser downloaded).

A `docket go` run appears and its tasks change state live, without a reload; a failed check's tail shows on the
run page; a question answered from the inbox lets its task go on; a receipt verifies from the page; a screenshot of
the run page is kept (tests/artifacts/). Skipped, saying why, only where Chromium or Playwright cannot be had.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.go_world import agent_world, make_go_world, wait_until
from tests.e2e.test_serve import Served

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

TASKS = '''\
[[tasks]]
id = "name"
title = "name the greeter"
prompt = "NAME"

[[tasks]]
id = "broken"
title = "a change whose check fails"
prompt = "BROKEN"
'''
# The agent: for NAME, asks which name and writes it; for BROKEN, writes Python the world's check (compiles) refuses.
AGENT = '''
import subprocess, sys, time
prompt = sys.stdin.read()
if "BROKEN" in prompt:
    open("oops.py", "w").write("def f(:\\n")
    sys.exit(0)
time.sleep(2)
answer = subprocess.run([sys.argv[1], "request", "ask", "Which name?", "--choice", "ada", "--choice", "bob",
                         "--reason", "choice", "--id", "which"], capture_output=True, text=True)
open("name.py", "w").write(f"NAME = {answer.stdout.strip()!r}\\n")
'''


@pytest.fixture
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium here (Debian: apt-get install chromium; .ci/run installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed (pip install playwright)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def test_a_run_seen_live_its_failed_check_its_question_answered_and_its_receipt_verified(tmp_path, browser):
    world, keys = agent_world(tmp_path, "webagent", AGENT, TASKS)
    assert world.run("init").returncode in (0, 3)
    served = Served(world)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    go = None
    try:
        page.goto(served.url)
        assert page.url == served.base + "/"  # the token left the address once the cookie was set
        page.wait_for_selector("text=no runs yet")
        go = world.start("go", "--goal", "name the greeter", "--tasks", "tasks.toml", "--id", "r1", "--agent",
                         "webagent", "--key", f"{keys}.key", "--cycles", "1", "--json")
        page.wait_for_selector('tr[data-run="r1"]', timeout=60_000)  # appeared without a reload
        page.click('tr[data-run="r1"] a')
        page.wait_for_selector('tr[data-task="r1.name"] .state.awaiting-input', timeout=60_000)
        page.wait_for_selector('tr.check.failed pre.tail:has-text("SyntaxError")', timeout=60_000)
        page.click("header nav >> text=inbox")
        page.wait_for_selector("li.request >> text=Which name?")
        page.click('li.request button[value="2"]')
        page.wait_for_selector("#notice.answered >> text=recorded: bob")
        page.goto(served.base + "/runs/r1")
        page.wait_for_selector('tr[data-task="r1.name"] .state.delivered', timeout=120_000)
        page.wait_for_selector("button.verify", timeout=60_000)
        page.click("button.verify")
        page.wait_for_selector("pre.verified.ok", timeout=60_000)
        assert "ok: run r1" in page.inner_text("pre.verified")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "serve-run-page.png"), full_page=True)
    finally:
        page.close()
        served.stop()
        if go is not None and go.poll() is None:
            go.kill()
            go.communicate()
    assert world.file_at("main", "name.py") == "NAME = 'bob'\n"
    (answered,) = world.events("QuestionAnswered")
    assert answered["payload"]["via"] == "web"
    assert errors == []  # no script error, no refused resource (the policy would say so in the console)
    assert wait_until(lambda: go.poll() is not None, timeout=5)


def test_the_page_keeps_up_with_a_thousand_task_run_and_serve_stays_under_100_mb(tmp_path, browser):
    """A run of 1,000 planned tasks: its page shows every task, follows the run's end without a reload, and the
    server's memory stays under 100 MB."""
    import json

    import psutil

    from docket.adapters.service_layer.go.start import record_plan
    from docket.adapters.service_layer.kernel.ledger import Ledger
    from docket.adapters.service_layer.use_cases.tasks import plan_task
    from docket.adapters.world.clock import SystemClock

    world = make_go_world(tmp_path)
    assert world.run("init").returncode in (0, 3)
    opened = world.run("run", "open", "--target", "main", "--goal", "a thousand tasks", "--json")
    assert opened.returncode == 0, opened.stderr
    run_id = json.loads(opened.stdout)["run"]["run_id"]
    ledger, clock = Ledger(world.ledger), SystemClock()
    try:
        tasks = [f"{run_id}.t{n:04d}" for n in range(1000)]
        for task_id in tasks:
            plan_task(ledger, clock, run_id, task_id, f"task {task_id}")
        record_plan(ledger, clock, run_id, [(task_id, []) for task_id in tasks], "scripted", 1, 8, None)
    finally:
        ledger.close()
    served = Served(world)
    page = browser.new_page()
    try:
        page.goto(served.url)
        page.goto(f"{served.base}/runs/{run_id}")
        assert page.locator("tr[data-task]").count() == 1000
        page.wait_for_selector("#live.on")
        aborted = world.run("run", "abort", run_id, "--reason", "enough")
        assert aborted.returncode == 0, aborted.stderr
        page.wait_for_selector("h1 .outcome.stopped", timeout=60_000)  # followed live: no reload
        assert page.locator("tr[data-task]").count() == 1000
        for _ in range(5):
            assert served.request(f"/runs/{run_id}")[0] == 200
        rss = psutil.Process(served.process.pid).memory_info().rss
        assert rss < 100 * 1024 * 1024, f"{rss / 2 ** 20:.1f} MiB"
    finally:
        page.close()
        served.stop()
