"""`docket serve` over HTTP, without a browser: a real server process on a real ledger a real `docket go` made.

The token guards every route (401, and nothing more in the body); the pages escape what the ledger holds; the one
write (an answer) needs the page's CSRF value and is recorded as `docket answer` records it, via "web"; a receipt
verifies server-side; the ledger's moves stream as server-sent events. The browser tests are in test_serve_browser.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.go_world import GoWorld, agent_world, make_go_world, wait_until

HOSTILE = '<script>alert(1)</script>\x1b]0;owned\x07 & "quotes" \'single\''  # the goal: docket takes any text for it
HOSTILE_TITLE = '<img src=x onerror=alert(2)> & "quotes" \'single\''  # a title refuses control characters
# as the pages show them: escaped by the templates' autoescape (markupsafe: " is &#34;, ' is &#39;), controls visible
SHOWN_GOAL = "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b]0;owned\\x07 &amp; &#34;quotes&#34; &#39;single&#39;"
SHOWN_TITLE = "&lt;img src=x onerror=alert(2)&gt; &amp; &#34;quotes&#34; &#39;single&#39;"
TASKS = f'[[tasks]]\nid = "name"\ntitle = {json.dumps(HOSTILE_TITLE)}\nprompt = "Name it."\n'
ASKING = '''
import subprocess, sys
answer = subprocess.run([sys.argv[1], "request", "ask", "Which name?", "--choice", "ada", "--choice", "bob",
                         "--reason", "choice", "--id", "which"], capture_output=True, text=True)
open("name.py", "w").write(f"NAME = {answer.stdout.strip()!r}\\n")
'''


class Served:
    """A `docket serve --port 0` of the world's repository, and requests to it."""

    def __init__(self, world: GoWorld, *extra: str) -> None:
        self.process = subprocess.Popen(world.argv("serve", "--port", "0", *extra),
                                        cwd=world.repo, env=world.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.url = self.process.stdout.readline().strip()  # type: ignore[union-attr]
        assert self.url.startswith("http://127.0.0.1:"), self.process.stderr.read()  # type: ignore[union-attr]
        self.base, self.token = self.url.split("/?token=")

    def stop(self) -> str:
        self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err

    def request(self, path: str, *, token: str | None = "bearer", method: str = "GET", data: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        sent = dict(headers or {})
        if token == "bearer":
            sent["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=sent)
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()

    def csrf(self) -> str:
        _, _, page = self.request("/")
        return page.split('name="docket-csrf" content="')[1].split('"')[0]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        return None


@pytest.fixture
def asked(tmp_path: Path):
    """A run whose one task (a hostile title) waits for its question's answer, and docket serve on it."""
    world, keys = agent_world(tmp_path, "asker", ASKING, TASKS)
    go = world.start("go", "--goal", HOSTILE, "--tasks", "tasks.toml", "--id", "r1", "--agent", "asker", "--key",
                     f"{keys}.key", "--json")
    assert wait_until(lambda: world.json("inbox")["questions"], timeout=90)
    served = Served(world)
    try:
        yield world, go, served
    finally:
        served.stop()
        if go.poll() is None:
            go.kill()
            go.communicate()


ROUTES = ["/", "/runs/r1", "/runs/r1/timeline.svg", "/inbox", "/events", "/static/app.js", "/static/style.css",
          "/runs/nowhere", "/no/such/route"]


def test_without_the_token_every_route_is_refused_and_nothing_leaks(asked):
    world, _, served = asked
    for path in ROUTES:
        for token in (None, "wrong"):
            headers = {"Authorization": "Bearer wrong"} if token else {}
            status, got, body = served.request(path, token=None, headers=headers)
            assert (status, body) == (401, "unauthorized"), path
            assert "set-cookie" not in {k.lower() for k in got}
    for path, method in (("/inbox/req-aaaaaaaaaaaaaaaa", "POST"), ("/runs/r1/verify", "POST")):
        assert served.request(path, token=None, method=method, data=b"choice=1")[0] == 401
    status, _, body = served.request(f"/?token={served.token}x", token=None)
    assert status == 401 and served.token not in body


def test_the_token_url_sets_a_cookie_and_leaves_the_token_out_of_the_page_address(asked):
    _, _, served = asked
    status, headers, _ = served.request(f"/runs/r1?token={served.token}", token=None)
    assert status == 303 and headers["location"] == "/runs/r1"
    cookie = headers["set-cookie"]
    assert f"docket_token={served.token}" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    status, _, page = served.request("/runs/r1", token=None, headers={"Cookie": cookie.split(";")[0]})
    assert status == 200 and "<h1>run r1" in page


def test_the_token_is_kept_0600_in_the_docket_folder_and_made_again_only_when_asked(asked):
    world, _, served = asked
    kept = world.repo / ".git" / "docket" / "serve.token"
    assert kept.read_text().strip() == served.token and kept.stat().st_mode & 0o777 == 0o600
    served.stop()
    again = Served(world)
    try:
        assert again.token == served.token
    finally:
        again.stop()
    fresh = Served(world, "--new-token")
    try:
        assert fresh.token != served.token
        assert fresh.request("/", token=None, headers={"Authorization": f"Bearer {served.token}"})[0] == 401
        assert fresh.request("/")[0] == 200
    finally:
        fresh.stop()


def test_pages_show_a_hostile_goal_and_title_as_text_under_a_policy_that_forbids_inline_script(asked):
    _, _, served = asked
    for path in ("/", "/runs/r1", "/inbox"):
        status, headers, page = served.request(path)
        assert status == 200, path
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
        assert "<script>alert" not in page and "\x1b" not in page and "\x07" not in page
        assert page.count("<script") == 1 and '<script src="/static/app.js" defer></script>' in page
    _, _, run = served.request("/runs/r1")
    assert f'<p class="goal">{SHOWN_GOAL}</p>' in run and f'<td class="title">{SHOWN_TITLE}</td>' in run
    assert "<img" not in run and "'single'" not in run and '"quotes"' not in run
    _, _, runs = served.request("/")
    assert f'<td class="goal">{SHOWN_GOAL}</td>' in runs
    _, _, fragment = served.request("/runs/r1?fragment=main")  # what the page's script swaps in: escaped the same
    assert fragment.startswith("<main data-position=") and fragment.endswith("</main>") and "<script" not in fragment
    assert f'<p class="goal">{SHOWN_GOAL}</p>' in fragment and f'<td class="title">{SHOWN_TITLE}</td>' in fragment
    _, headers, svg = served.request("/runs/r1/timeline.svg")
    assert headers["content-type"].startswith("image/svg+xml") and "<script" not in svg
    assert "r1.name" in svg and 'class="span agent"' in svg


def test_an_answer_from_the_page_needs_its_csrf_value_and_is_recorded_via_the_web(asked):
    world, go, served = asked
    (question,) = world.json("inbox")["questions"]
    path = f"/inbox/{question['question_id']}"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert served.request(path, method="POST", data=b"choice=2", headers=form)[0] == 403  # no CSRF value
    wrong_origin = {**form, "X-Docket-CSRF": served.csrf(), "Origin": "http://evil.example"}
    assert served.request(path, method="POST", data=b"choice=2", headers=wrong_origin)[0] == 403
    assert world.events("QuestionAnswered") == []
    status, _, body = served.request(path, method="POST", data=b"choice=2",
                                     headers={**form, "X-Docket-CSRF": served.csrf()})
    assert status == 200 and json.loads(body)["answer"] == "bob", body
    (answered,) = world.events("QuestionAnswered")
    assert (answered["payload"]["answer"], answered["payload"]["via"]) == ("bob", "web")
    status, _, body = served.request(path, method="POST", data=b"choice=1",
                                     headers={**form, "X-Docket-CSRF": served.csrf()})
    assert status == 409 and json.loads(body)["error"] == "already-answered"
    out, err = go.communicate(timeout=180)
    assert go.returncode == 0, err + out
    assert world.file_at("main", "name.py") == "NAME = 'bob'\n"
    status, _, body = served.request("/runs/r1/verify", method="POST", headers={"X-Docket-CSRF": served.csrf()})
    verified = json.loads(body)
    assert status == 200 and verified["ok"] is True and verified["run_id"] == "r1", body


def test_the_ledger_moving_streams_as_events(asked):
    world, _, served = asked
    before = world.json("status")["position"]
    request = urllib.request.Request(served.base + "/events", headers={"Authorization": f"Bearer {served.token}"})
    with urllib.request.urlopen(request, timeout=30) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")

        def position() -> int:
            assert stream.readline().decode() == "event: position\n"
            said = stream.readline().decode()
            assert stream.readline() == b"\n"
            return int(said.removeprefix("data: "))

        first = position()
        assert first >= before
        (question,) = world.json("inbox")["questions"]
        assert world.run("answer", question["question_id"], "ada").returncode == 0
        assert position() > first  # the answer moved the ledger: the page is told


def test_docket_serve_stays_under_100_mb(asked):
    import psutil

    _, _, served = asked
    for _ in range(20):
        for path in ("/", "/runs/r1", "/inbox", "/runs/r1/timeline.svg"):
            assert served.request(path)[0] == 200
    rss = psutil.Process(served.process.pid).memory_info().rss
    assert rss < 100 * 1024 * 1024, f"{rss / 2 ** 20:.1f} MiB"


def test_a_bad_port_or_address_is_a_clear_error(tmp_path):
    world = make_go_world(tmp_path)
    assert world.run("init").returncode in (0, 3)
    (tmp_path / "not-a-key.pub").write_text("hello\n")
    for args, code, exit_code in ((["--port", "70000"], "bad-port", 2),
                                  (["--bind", "no.such.host.invalid"], "bad-address", 2),
                                  (["--bind", "J\u00caK\x99\u00e67"], "bad-address", 2),  # no resolver encodes it
                                  (["--key", str(tmp_path / "missing.pub")], "key-not-found", 5),  # refused at start
                                  (["--key", str(tmp_path / "not-a-key.pub")], "bad-key", 2)):
        done = world.run("serve", *args)
        assert done.returncode == exit_code and f"docket: error: {code}:" in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("bind, exposed", [("127.0.0.1", False), ("::1", False), ("0.0.0.0", True)])
def test_only_an_address_beyond_this_machine_is_warned_about(tmp_path, bind, exposed):
    world = make_go_world(tmp_path)
    assert world.run("init").returncode in (0, 3)
    served = subprocess.Popen(world.argv("serve", "--port", "0", "--bind", bind), cwd=world.repo, env=world.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = served.stdout.readline()  # type: ignore[union-attr]
    finally:
        served.terminate()
        _, err = served.communicate(timeout=20)
    if not url and "cannot-listen" in err:
        pytest.skip(f"this machine cannot listen on {bind}")
    assert url.startswith("http://"), err
    assert ("serve-exposed" in err) is exposed, err
