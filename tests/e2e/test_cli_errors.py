"""Every CLI error path: one line on stderr, its documented code and exit status, no traceback.

DESIGN.md, "CLI conventions": an error is exactly one line on stderr,
``docket: error: <code>: <message>``, with exit 0 ok, 1 verification failed,
2 usage or bad input, 3 conflict or refused by an invariant, 4 effect outcome
unknown, 5 not found; no traceback unless ``--debug``; with ``--json`` stdout
holds exactly one JSON document (``{"error": {...}}`` unless the command
printed its own, such as verify's ``{"ok": false, ...}``).

Each table case runs twice, with and without ``--json``. The cases share one
ledger per table (built once through the CLI): a refused command appends
nothing, so the cases do not disturb one another. Paths that append (a failed
base pin, an unknown outcome) have their own ledger below.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from docket import __version__
from docket.adapters.world.files.paths import find_git_common_dir

from ..conftest import T0, Docket, Result, git

ERROR_LINE = re.compile(r"docket: error: ([a-z][a-z0-9-]*): (.+)\n")
ZERO_DIGEST = "0" * 64


def supervise_from(ledger_path: Path, run_id: str, now: str) -> None:
    """Record a supervision of the run (RunSupervised), as `docket worker launch` does while its agent runs."""
    from docket.adapters.service_layer.kernel.ledger import Ledger
    from docket.domain import run as run_aggregate
    from docket.domain.containment.processes import ProcessIdentity

    ledger = Ledger(ledger_path)
    try:
        ledger.decide(lambda at: run_aggregate.supervised(
            ledger.get(run_aggregate.apply, run_aggregate.stream_of(run_id)), "s1",
            ProcessIdentity("host", "boot", 1, 1, "1"), at), now)
    finally:
        ledger.close()


def T(minutes: int) -> str:
    return f"2026-01-01T{minutes // 60:02d}:{minutes % 60:02d}:00.000Z"


def assert_error(result: Result, code: str, exit_code: int, *, as_json: bool = False,
                 mentions: tuple[str, ...] = (), quiet_stdout: bool = True) -> dict | None:
    """The error contract; returns the JSON document when as_json."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == exit_code, f"exit {result.returncode}, wanted {exit_code}: {result.stderr!r}"
    match = ERROR_LINE.fullmatch(result.stderr)
    assert match, f"stderr is not one error line: {result.stderr!r}"
    assert match.group(1) == code, result.stderr
    message = match.group(2)
    for word in mentions:
        assert word in message, f"{word!r} not in {message!r}"
    if not as_json:
        if quiet_stdout:
            assert result.stdout == "", result.stdout
        return None
    doc = json.loads(result.stdout)  # exactly one document: trailing data would raise
    assert isinstance(doc, dict), doc
    assert doc["error"] == {"code": code, "message": message}, doc
    return doc


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "first")
    return path


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}


@dataclass
class World:
    docket: Docket
    values: dict[str, str]

    def run(self, args: tuple[str, ...], now: str | None, as_json: bool) -> Result:
        argv = [a.format(**self.values) for a in args] + (["--json"] if as_json else [])
        return self.docket(*argv, check=False, now=now or T0)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """One ledger holding runs, a task, workers and leases in every state the table refuses."""
    root = tmp_path_factory.mktemp("world")
    repo = new_repo(root / "repo")
    d = Docket(repo, clean_env())

    def call(*args: str, now: str = T0) -> dict:
        return d(*args, "--json", now=now).json()

    call("init")
    call("run", "open", "--target", "main", "--goal", "active run", "--id", "r-active")
    call("task", "plan", "r-active", "--title", "a task", "--id", "t1")
    call("worker", "register", "r-active", "--role", "implementer", "--task", "t1", "--id", "w1")
    held = call("lease", "grant", "res/held", "--worker", "w1", "--generation", "1", "--ttl", "10m")["token"]
    released = call("lease", "grant", "res/released", "--worker", "w1", "--generation", "1", "--ttl", "10m")["token"]
    call("lease", "release", "res/released", "--token", str(released))
    call("worker", "register", "r-active", "--role", "implementer", "--id", "w2")
    fenced = call("lease", "grant", "res/fenced", "--worker", "w2", "--generation", "1", "--ttl", "10m")["token"]
    assert call("worker", "relaunch", "w2")["generation"] == 2

    call("run", "open", "--target", "main", "--goal", "paused run", "--id", "r-paused")
    call("run", "pause", "r-paused")
    call("run", "open", "--target", "main", "--goal", "aborted run", "--id", "r-aborted")
    call("worker", "register", "r-aborted", "--role", "implementer", "--id", "wa")
    call("run", "abort", "r-aborted", "--reason", "wrong goal")
    call("run", "open", "--target", "main", "--goal", "spent run", "--budget", "1m", "--id", "r-spent")
    supervise_from(d.ledger, "r-spent", T0)  # as a worker's supervisor would: the budget's clock runs
    call("run", "pause", "r-spent", now=T(2))  # 2 minutes used of a 1 minute budget

    (repo / "anchor-bad.json").write_text("{not json")
    (repo / "anchor-shape.json").write_text('{"position": "two", "digest": 2}')
    (repo / "anchor-wrong.json").write_text(json.dumps({"position": 2, "digest": ZERO_DIGEST}))
    (root / "empty.sqlite").write_bytes(b"")
    (root / "garbage.sqlite").write_text("this is not a database\n")
    values = {"held": str(held), "released": str(released), "fenced": str(fenced), "dir": str(root)}
    return World(d, values)


def case(name: str, args: tuple[str, ...], code: str, exit_code: int, *mentions: str, now: str | None = None):
    return pytest.param(args, code, exit_code, mentions, now, id=name)


LONG = "x" * 5000
GRANT = ("lease", "grant")

USAGE_AND_BAD_INPUT = [
    case("no-command", (), "usage", 2, "command"),
    case("unknown-command", ("frob",), "usage", 2, "frob"),
    case("noun-without-verb", ("run",), "usage", 2, "VERB"),
    case("unknown-verb", ("lease", "steal", "res/held"), "usage", 2, "steal"),
    case("unknown-option", ("status", "--frob"), "usage", 2, "--frob"),
    case("run-open-without-goal", ("run", "open", "--target", "main"), "usage", 2, "--goal"),
    case("run-open-without-target", ("run", "open", "--goal", "g"), "no-target", 2, "--target"),
    case("lease-grant-without-resource", (*GRANT, "--worker", "w1", "--generation", "1", "--ttl", "1m"),
         "usage", 2, "RESOURCE"),
    case("generation-zero", (*GRANT, "res/x", "--worker", "w1", "--generation", "0", "--ttl", "1m"),
         "usage", 2, "--generation"),
    case("generation-not-integer", (*GRANT, "res/x", "--worker", "w1", "--generation", "one", "--ttl", "1m"),
         "usage", 2, "--generation"),
    case("token-not-integer", ("lease", "renew", "res/held", "--token", "abc", "--ttl", "1m"), "usage", 2, "--token"),
    case("token-negative", ("lease", "release", "res/held", "--token=-3"), "usage", 2, "--token"),
    case("replay-until-zero", ("replay", "--until", "0"), "usage", 2, "--until"),
    case("replay-apply-with-until", ("replay", "--apply", "--until", "3"), "usage", 2, "--until"),
    case("completion-unknown-shell", ("completion", "fish"), "usage", 2, "fish"),
    case("budget-bad-unit", ("run", "open", "--target", "main", "--goal", "g", "--budget", "5x"),
         "bad-duration", 2, "5x"),
    case("budget-zero", ("run", "open", "--target", "main", "--goal", "g", "--budget", "0m"), "bad-duration", 2),
    case("ttl-zero", (*GRANT, "res/x", "--worker", "w1", "--generation", "1", "--ttl", "0s"), "bad-duration", 2),
    case("ttl-trailing-number", (*GRANT, "res/x", "--worker", "w1", "--generation", "1", "--ttl", "1h30"),
         "bad-duration", 2, "1h30"),
    case("renew-ttl-bad", ("lease", "renew", "res/held", "--token", "{held}", "--ttl", "soon"), "bad-duration", 2),
    case("status-at-not-a-time", ("status", "--at", "yesterday"), "bad-time", 2, "yesterday"),
    case("status-at-without-offset", ("status", "--at", "2026-01-01T00:00:00"), "bad-time", 2),
    case("status-at-impossible-date", ("status", "r-active", "--at", "2026-13-01T00:00:00Z"), "bad-time", 2),
    case("docket-now-not-a-time", ("run", "pause", "r-active"), "bad-time", 2, "garbage", now="garbage"),
    case("log-unknown-type", ("log", "--type", "Nope"), "unknown-event-type", 2, "Nope"),
    case("log-unknown-version", ("log", "--type", "LeaseGranted.v2"), "unknown-event-type", 2),
    case("empty-goal", ("run", "open", "--target", "main", "--goal", "  "), "empty-goal", 2),
    # Values the event models refuse: a one-line invalid-input naming the field, never "internal".
    case("run-id-with-space", ("run", "open", "--target", "main", "--goal", "g", "--id", "bad id"),
         "bad-id", 2, "run id 'bad id' must be 1 to 128 letters"),
    case("branch-with-space", ("run", "open", "--target", "bad branch", "--goal", "g"),
         "bad-branch-name", 2, "bad branch"),
    case("goal-too-long", ("run", "open", "--target", "main", "--goal", LONG), "too-long", 2,
         "goal is 5000 characters; at most 4000"),
    case("task-id-with-space", ("task", "plan", "r-active", "--title", "t", "--id", "bad id"),
         "bad-id", 2, "task id"),
    case("empty-title", ("task", "plan", "r-active", "--title", ""), "invalid-input", 2, "title"),
    case("role-with-space", ("worker", "register", "r-active", "--role", "bad role"), "bad-id", 2, "role"),
    case("worker-id-with-slash", ("worker", "register", "r-active", "--role", "impl", "--id", "bad/id"),
         "bad-id", 2, "worker id"),
    case("logs-generation-zero", ("worker", "logs", "w1", "--generation", "0"), "usage", 2, "--generation"),
    case("init-ledger-in-a-missing-folder", ("init", "--ledger", "{dir}/nowhere/x.sqlite"), "bad-ledger-path", 2,
         "does not exist"),
    case("empty-pause-reason", ("run", "pause", "r-active", "--reason", ""), "invalid-input", 2, "reason"),
    case("go-tasks-file-missing", ("go", "--goal", "g", "--tasks", "no-such.toml"), "bad-tasks-file", 2),
    case("go-without-tasks", ("go", "--goal", "g"), "usage", 2, "--task"),
    case("go-without-goal", ("go", "--task", "t"), "usage", 2, "--goal"),
    case("go-zero-parallel", ("go", "--goal", "g", "--task", "t", "--parallel", "0"), "bad-count", 2),
    case("go-zero-checks", ("go", "--goal", "g", "--task", "t", "--checks", "0"), "bad-count", 2, "from 1 to 256"),
    case("go-too-many-checks", ("go", "--goal", "g", "--task", "t", "--checks", "257"), "bad-count", 2,
         "from 1 to 256"),
    case("go-resume-unknown-run", ("go", "--resume", "r-nope"), "run-not-found", 5),
    case("empty-abort-reason", ("run", "abort", "r-active", "--reason", ""), "invalid-input", 2, "reason"),
    case("empty-resource", (*GRANT, "", "--worker", "w1", "--generation", "1", "--ttl", "1m"),
         "bad-resource", 2, "resource"),
    case("resource-with-newline", (*GRANT, "a\nb", "--worker", "w1", "--generation", "1", "--ttl", "1m"),
         "bad-resource", 2, "resource"),
    # Ledger files.
    case("ledger-option-missing-file", ("status", "--ledger", "{dir}/missing.sqlite"), "no-ledger", 5, "missing"),
    case("ledger-option-missing-file-write", ("run", "pause", "r-active", "--ledger", "{dir}/missing.sqlite"),
         "no-ledger", 5),
    case("ledger-option-empty-file", ("status", "--ledger", "{dir}/empty.sqlite"), "no-ledger", 5),
    case("ledger-option-empty-file-verify", ("verify", "--ledger", "{dir}/empty.sqlite"), "no-ledger", 5),
    case("ledger-option-not-sqlite", ("log", "--ledger", "{dir}/garbage.sqlite"), "not-a-ledger", 2),
    case("ledger-option-directory", ("status", "--ledger", "{dir}"), "ledger-is-a-directory", 2),
    case("ledger-option-directory-write", ("run", "pause", "r-active", "--ledger", "{dir}"),
         "ledger-is-a-directory", 2),
    case("status-at-past-the-head", ("status", "--at", "999999"), "position-not-found", 5, "999999"),
    case("replay-until-past-the-head", ("replay", "--until", "999999"), "position-not-found", 5, "999999"),
    # Anchors.
    case("anchor-missing", ("verify", "--anchor", "missing.json"), "anchor-not-found", 5, "missing.json"),
    case("anchor-not-json", ("verify", "--anchor", "anchor-bad.json"), "bad-anchor", 2),
    case("anchor-wrong-shape", ("verify", "--anchor", "anchor-shape.json"), "bad-anchor", 2, "position"),
    case("anchor-digest-differs", ("verify", "--anchor", "anchor-wrong.json"), "chain-broken", 1, "position 2"),
]

NOT_FOUND = [
    case("pause-unknown-run", ("run", "pause", "r-nope"), "run-not-found", 5, "r-nope"),
    case("resume-unknown-run", ("run", "resume", "r-nope"), "run-not-found", 5),
    case("abort-unknown-run", ("run", "abort", "r-nope", "--reason", "x"), "run-not-found", 5),
    case("complete-unknown-run", ("run", "complete", "r-nope"), "run-not-found", 5),
    case("status-unknown-run", ("status", "r-nope"), "run-not-found", 5, "r-nope"),
    case("status-run-before-it-opened", ("status", "r-active", "--at", "2025-01-01T00:00:00Z"), "run-not-found", 5),
    case("status-run-at-position-1", ("status", "r-active", "--at", "1"), "run-not-found", 5),
    case("task-plan-unknown-run", ("task", "plan", "r-nope", "--title", "t"), "run-not-found", 5),
    case("worker-register-unknown-run", ("worker", "register", "r-nope", "--role", "impl"), "run-not-found", 5),
    case("worker-register-unknown-task", ("worker", "register", "r-active", "--role", "impl", "--task", "t-nope"),
         "task-not-found", 5, "t-nope"),
    case("relaunch-unknown-worker", ("worker", "relaunch", "w-nope"), "worker-not-found", 5, "w-nope"),
    case("candidate-list-unknown-run", ("candidate", "list", "r-nope"), "run-not-found", 5, "r-nope"),
    case("export-key-missing", ("export", "r-active", "--key", "no-such.key", "--out", "x.jsonl"),
         "key-not-found", 5, "no-such.key"),
    case("grant-to-unknown-worker", (*GRANT, "res/x", "--worker", "w-nope", "--generation", "1", "--ttl", "1m"),
         "worker-not-found", 5),
]

REFUSED = [
    case("pause-paused-run", ("run", "pause", "r-paused"), "run-not-active", 3),
    case("pause-aborted-run", ("run", "pause", "r-aborted"), "run-not-active", 3),
    case("resume-active-run", ("run", "resume", "r-active"), "run-not-paused", 3),
    case("resume-spent-run", ("run", "resume", "r-spent"), "budget-exhausted", 3),
    case("complete-aborted-run", ("run", "complete", "r-aborted"), "run-closed", 3),
    case("abort-aborted-run", ("run", "abort", "r-aborted", "--reason", "again"), "run-closed", 3),
    case("task-plan-in-closed-run", ("task", "plan", "r-aborted", "--title", "t"), "run-closed", 3),
    case("worker-register-in-closed-run", ("worker", "register", "r-aborted", "--role", "impl"), "run-closed", 3),
    case("relaunch-in-closed-run", ("worker", "relaunch", "wa"), "run-closed", 3),
    case("grant-in-closed-run", (*GRANT, "res/x", "--worker", "wa", "--generation", "1", "--ttl", "1m"),
         "run-closed", 3),
    case("worker-task-of-other-run", ("worker", "register", "r-paused", "--role", "impl", "--task", "t1"),
         "task-not-in-run", 3),
    case("run-open-existing-id", ("run", "open", "--target", "main", "--goal", "g", "--id", "r-active"),
         "run-exists", 3),
    case("task-plan-existing-id", ("task", "plan", "r-active", "--title", "t", "--id", "t1"), "task-exists", 3),
    case("worker-register-existing-id", ("worker", "register", "r-active", "--role", "impl", "--id", "w1"),
         "worker-exists", 3),
    case("grant-held-lease", (*GRANT, "res/held", "--worker", "w1", "--generation", "1", "--ttl", "1m"),
         "lease-held", 3),
    case("grant-fenced-generation", (*GRANT, "res/x", "--worker", "w2", "--generation", "1", "--ttl", "1m"),
         "stale-generation", 3),
    case("renew-by-fenced-holder", ("lease", "renew", "res/fenced", "--token", "{fenced}", "--ttl", "1m"),
         "stale-generation", 3),
    case("renew-wrong-token", ("lease", "renew", "res/held", "--token", "999", "--ttl", "1m"), "stale-token", 3),
    case("release-wrong-token", ("lease", "release", "res/held", "--token", "999"), "stale-token", 3),
    case("renew-never-leased", ("lease", "renew", "res/never", "--token", "1", "--ttl", "1m"), "lease-not-held", 3),
    case("release-never-leased", ("lease", "release", "res/never", "--token", "1"), "lease-not-held", 3),
    case("expire-never-leased", ("lease", "expire", "res/never"), "lease-not-held", 3),
    case("release-released-lease", ("lease", "release", "res/released", "--token", "{released}"),
         "lease-not-held", 3),
    case("expire-released-lease", ("lease", "expire", "res/released"), "lease-not-held", 3),
    case("expire-before-expiry", ("lease", "expire", "res/held"), "lease-not-expired", 3, now=T(9)),
    case("renew-after-expiry", ("lease", "renew", "res/held", "--token", "{held}", "--ttl", "1m"),
         "lease-expired", 3, now=T(10)),
]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("args, code, exit_code, mentions, now", USAGE_AND_BAD_INPUT + NOT_FOUND + REFUSED)
def test_error(world, args, code, exit_code, mentions, now, as_json):
    assert_error(world.run(args, now, as_json), code, exit_code, as_json=as_json, mentions=mentions)


def test_refused_commands_appended_nothing(world):
    """The table's ledger still verifies, and holds only what the fixture recorded."""
    before = world.docket("verify", "--json", now=T0).json()
    assert before["ok"] is True
    log = world.docket("log", "--json", now=T0).json()
    assert log["head"] == before["events"]
    assert not (Path(world.values["dir"]) / "missing.sqlite").exists()
    assert not (Path(world.values["dir"]) / "nowhere").exists()
    assert not (Path(world.values["dir"]) / "garbage.views.sqlite").exists()


# Before `docket init`: every command that needs the ledger says so, and none creates it.
BEFORE_INIT = [
    ("status",), ("status", "r1"), ("status", "--at", "1"), ("log",), ("verify",), ("replay",),
    ("run", "open", "--target", "main", "--goal", "g"), ("run", "pause", "r1"), ("run", "complete", "r1"),
    ("task", "plan", "r1", "--title", "t"), ("worker", "register", "r1", "--role", "impl"),
    ("worker", "relaunch", "w1"), (*GRANT, "res", "--worker", "w1", "--generation", "1", "--ttl", "1m"),
    ("lease", "renew", "res", "--token", "1", "--ttl", "1m"), ("lease", "release", "res", "--token", "1"),
    ("lease", "expire", "res"),
]


@pytest.fixture(scope="module")
def uninitialised(tmp_path_factory: pytest.TempPathFactory) -> Docket:
    return Docket(new_repo(tmp_path_factory.mktemp("uninit") / "repo"), clean_env())


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("args", BEFORE_INIT, ids=lambda a: "-".join(a[:2]))
def test_before_init(uninitialised, args, as_json):
    result = uninitialised(*args, *(["--json"] if as_json else []), check=False, now=T0)
    assert_error(result, "no-ledger", 5, as_json=as_json, mentions=("docket init",))
    assert not uninitialised.ledger.parent.exists()


# Outside any git repository, with no --ledger: HOME and the working directory are both outside.
OUTSIDE = [("init",), ("status",), ("log",), ("verify",), ("run", "open", "--target", "main", "--goal", "g"),
           ("run", "pause", "r1"), ("lease", "expire", "res"), ("go", "--goal", "g", "--task", "t")]


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Docket:
    folder = tmp_path_factory.mktemp("not-a-repo")
    if find_git_common_dir(folder) is not None:
        pytest.skip(f"{folder} is inside a git repository")
    env = {**clean_env(), "HOME": str(folder), "GIT_CEILING_DIRECTORIES": str(folder.parent)}
    return Docket(folder, env)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("args", OUTSIDE, ids=lambda a: "-".join(a[:2]))
def test_outside_a_repository(outside, args, as_json):
    result = outside(*args, *(["--json"] if as_json else []), check=False, now=T0)
    assert_error(result, "not-a-repository", 5, as_json=as_json, mentions=("repository",))
    assert list(outside.cwd.iterdir()) == []


def test_run_open_outside_a_repository_even_with_a_ledger(outside):
    ledger = str(outside.cwd.parent / "explicit.sqlite")
    outside("init", "--ledger", ledger, now=T0)
    assert outside("status", "--ledger", ledger, now=T0).returncode == 0
    for as_json in (False, True):
        result = outside("run", "open", "--target", "main", "--goal", "g", "--ledger", ledger,
                         *(["--json"] if as_json else []), check=False, now=T0)
        assert_error(result, "not-a-repository", 5, as_json=as_json)


def test_base_pin_failures_and_unknown_outcomes(docket, repo):
    """Paths that append: a run still opening, an unknown branch (5), an unreadable branch (4)."""
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r-opening", "--no-wait", now=T0)
    for as_json in (False, True):
        flag = ["--json"] if as_json else []
        result = docket("run", "complete", "r-opening", *flag, check=False, now=T0)
        assert_error(result, "run-base-not-pinned", 3, as_json=as_json)

    for i, as_json in enumerate((False, True)):
        flag = ["--json"] if as_json else []
        result = docket("run", "open", "--target", "no-such-branch", "--goal", "g", "--id", f"r-missing{i}",
                        *flag, check=False, now=T0)
        assert_error(result, "unknown-branch", 5, as_json=as_json, mentions=("no-such-branch",))

    # A branch naming an object the repository does not have: nothing is known, so exit 4.
    (repo / ".git" / "refs" / "heads" / "ghost").write_text("0123456789abcdef0123456789abcdef01234567\n")
    for i, as_json in enumerate((False, True)):
        flag = ["--json"] if as_json else []
        result = docket("run", "open", "--target", "ghost", "--goal", "g", "--id", f"r-ghost{i}",
                        *flag, check=False, now=T0)
        assert_error(result, "outcome-unknown", 4, as_json=as_json, mentions=(f"r-ghost{i}",))

        # replay --apply prints its report, then the one-line error naming what is still pending; with --json
        # its report is the one document. Observed again at the same moment: the same unknown, not recorded twice.
        result = docket("replay", "--apply", *flag, check=False, now=T0)
        assert_error(result, "intents-pending", 4, quiet_stdout=False, mentions=("missing object",))
        if as_json:
            report = json.loads(result.stdout)  # exactly one document, and no {"error": ...} after it
            assert {r["outcome"] for r in report["applied"]} == {"still-unknown"}
            assert len(report["pending"]) == i + 1 and "missing object" in report["pending"][0]["reason"]
        else:
            assert "still pending: intent" in result.stdout


def test_verify_failure_prints_its_own_document(world):
    result = world.run(("verify", "--anchor", "anchor-wrong.json"), None, as_json=True)
    doc = assert_error(result, "chain-broken", 1, as_json=True)
    assert doc["ok"] is False


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_debug_shows_a_traceback_and_keeps_the_exit_code(world, as_json):
    result = world.run(("run", "pause", "r-paused", "--debug"), None, as_json)
    assert result.returncode == 3
    assert "Traceback (most recent call last)" in result.stderr
    last = result.stderr.splitlines(keepends=True)[-1]
    assert ERROR_LINE.fullmatch(last) and "run-not-active" in last, result.stderr
    if as_json:
        assert json.loads(result.stdout)["error"]["code"] == "run-not-active"


@pytest.mark.parametrize("args", [("status",), ("status", "r-active"), ("log", "--type", "LeaseGranted"),
                                  ("verify",), ("init",)], ids=lambda a: "-".join(a))
def test_success_with_json_is_one_document(world, args):
    result = world.run(args, None, as_json=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert isinstance(json.loads(result.stdout), dict)


def test_version(world):
    result = world.run(("--version",), None, as_json=False)
    assert result.returncode == 0
    assert result.stdout == f"docket {__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", __version__)


def test_console_script_reports_the_same_error(world):
    script = Path(sys.executable).with_name("docket")
    if not script.exists():
        pytest.skip("the docket console script is not installed next to this Python")
    proc = subprocess.run([str(script), "run", "pause", "r-paused"], check=False, cwd=world.docket.cwd,
                          env={**world.docket.env, "DOCKET_NOW": T0, "DOCKET_TESTING": "1"}, capture_output=True, text=True, timeout=60)
    assert_error(Result(proc.returncode, proc.stdout, proc.stderr), "run-not-active", 3)


@pytest.mark.parametrize("variable, value, accepts", [
    ("DOCKET_LOCK_TIMEOUT", "junk", "1 to 86400"), ("DOCKET_LOCK_TIMEOUT", "0", "1 to 86400"),
    ("DOCKET_LOCK_TIMEOUT", "1.5", "1 to 86400"), ("DOCKET_DATABASE_WAIT", "junk", "0 to 86400"),
    ("DOCKET_DATABASE_WAIT", "-1", "0 to 86400"), ("DOCKET_DATABASE_WAIT", "99999", "0 to 86400"),
    ("DOCKET_DATABASE_WAIT", "\u00b2", "0 to 86400")])
@pytest.mark.parametrize("args", [("status",), ("verify",), ("run", "open", "--target", "main", "--goal", "g")],
                         ids=lambda a: a[0])
def test_junk_in_a_waiting_setting_is_refused_whatever_the_command(world, variable, value, accepts, args):
    env = {**world.docket.env, variable: value}
    result = Docket(world.docket.cwd, env)(*args, check=False, now=T0)
    assert_error(result, "bad-config", 2, mentions=(f"{variable}={value!r}", accepts))
