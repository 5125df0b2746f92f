"""Hostile names through the real CLI: one name per resource, git's rules for branches, a safe terminal.

Issue 5, items 7, 8 and 9. A refused name appends nothing: each case compares the
ledger's head before and after.
"""

from __future__ import annotations

import os
import re

import pytest

from ..conftest import T0, Docket, git

ERROR_LINE = re.compile(r"docket: error: ([a-z][a-z0-9-]*): ([^\n]+)\n")
DANGEROUS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def head(docket: Docket) -> int:
    return docket("log", "--json", now=T0).json()["head"]


def assert_refused(docket: Docket, args: tuple[str, ...], code: str) -> str:
    """exit 2 with one clean error line naming code, and nothing appended; returns the message."""
    before = head(docket)
    result = docket(*args, check=False, now=T0)
    assert result.returncode == 2, f"{args!r} exited {result.returncode}: {result.stderr!r}"
    match = ERROR_LINE.fullmatch(result.stderr)
    assert match and match.group(1) == code, result.stderr
    assert not DANGEROUS.search(result.stderr), result.stderr
    assert head(docket) == before, f"{args!r} appended events"
    return match.group(2)


def _ledger_with_workers(docket: Docket, workers: int) -> Docket:
    """A run r1 with workers w0, w1, ... all at generation 1."""
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=T0)
    for n in range(workers):
        docket("worker", "register", "r1", "--role", "implementer", "--id", f"w{n}", now=T0)
    return docket


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Docket:
    """One ledger for the refused cases: a refused command appends nothing, so they cannot disturb one another."""
    repo = tmp_path_factory.mktemp("hostile") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")}
    return _ledger_with_workers(Docket(repo, env), 1)


def test_every_spelling_of_a_place_is_one_resource(docket, repo):
    ledger = _ledger_with_workers(docket, 7)
    spellings = ["wt/x", "./wt/x", "wt//x", "wt/x/", "wt/y/../x", f"{repo}/wt/x", f"{repo}//wt/./x/"]
    granted = ledger("lease", "grant", spellings[0], "--worker", "w0", "--generation", "1", "--ttl", "10m",
                     "--json", now=T0).json()
    assert granted["events"][0]["payload"]["resource"] == "wt/x"
    for n, spelling in enumerate(spellings[1:], start=1):
        refused = ledger("lease", "grant", spelling, "--worker", f"w{n}", "--generation", "1", "--ttl", "10m",
                         check=False, now=T0)
        assert refused.returncode == 3 and "lease-held" in refused.stderr, (spelling, refused.stderr)
    grants = ledger("log", "--type", "LeaseGranted", "--json").json()["events"]
    assert [g["payload"]["resource"] for g in grants] == ["wt/x"]
    assert [le["resource"] for le in ledger("status", "r1", "--json", now=T0).json()["leases"]] == ["wt/x"]

    # Relative names are relative to the repository root, wherever the command runs.
    inside = Docket(repo / "wt", ledger.env)
    (repo / "wt").mkdir()
    token = str(granted["token"])
    renewed = inside("lease", "renew", "./wt/x/", "--token", token, "--ttl", "20m", "--json", now=T0).json()
    assert renewed["events"][0]["payload"]["resource"] == "wt/x"
    released = inside("lease", "release", f"{repo}/wt/x", "--token", token, "--json", now=T0).json()
    assert released["events"][0]["payload"]["resource"] == "wt/x"


def test_task_names_are_resources_too(shared):
    granted = shared("lease", "grant", "task:t1", "--worker", "w0", "--generation", "1", "--ttl", "10m",
                     "--json", now=T0).json()
    assert granted["events"][0]["payload"]["resource"] == "task:t1"


@pytest.mark.parametrize("resource", [
    "../../outside", "wt/../../outside", "..", "/etc/passwd", "{repo}/../outside", "{repo}", "{repo}/", ".", "",
    "wt/..", "wt/\x1b[2Jx", "wt/\u202eexe.txt", "wt/\x85x", "wt/\x7fx", "wt/a\nb", "wt/\u2066x", "wt/\u200fx",
])
def test_hostile_resources_are_refused_and_not_recorded(shared, resource):
    resource = resource.format(repo=shared.cwd)
    message = assert_refused(shared, ("lease", "grant", resource, "--worker", "w0", "--generation", "1",
                                      "--ttl", "10m"), "bad-resource")
    assert "resource" in message


@pytest.mark.parametrize("verb", [("renew", "--token", "9", "--ttl", "1m"), ("release", "--token", "9"), ("expire",)])
def test_every_lease_command_refuses_hostile_resources(shared, verb):
    assert_refused(shared, ("lease", verb[0], "../../outside", *verb[1:]), "bad-resource")


@pytest.mark.parametrize("branch", [
    "../../HEAD", "a..b", "main.lock", "wt/main.lock/x", "@{-1}", "a@{b", "x/", "/x", "a//b", "-x", "a b", "@", "HEAD",
    ".hidden", "a/.b", "x.", "a:b", "a~1", "a^", "a?", "a*", "a[b", "a\\b", "a\x1bb", "a\x7fb", "a\u202eb", "a\x9bb",
])
def test_bad_branch_names_are_refused_before_anything_is_recorded(shared, branch):
    message = assert_refused(shared, ("run", "open", f"--target={branch}", "--goal", "g"), "bad-branch-name")
    assert "branch name" in message


def test_good_branch_names_still_open_runs(docket, repo):
    docket("init", now=T0)
    for branch in ["feature/a-b_c.d", "release@2", "caf\u00e9", "a.b/c"]:
        git(repo, "branch", branch)
        assert docket("run", "open", f"--target={branch}", "--goal", "g", "--json", now=T0).json()["run"]["base_commit"]


HOSTILE = "fix it\nr-forged   active     main@000000000000  0s  forged line\x1b[2J\x1b]0;pwned\x07\u202etxt.exe\x9b31m"


def test_nothing_typed_drives_the_terminal(docket):
    docket("init", now=T0)
    docket("run", "open", "--target", "main", "--goal", HOSTILE, "--id", "r1", now=T0)
    docket("task", "plan", "r1", "--title", HOSTILE, "--id", "t1", now=T0)
    docket("run", "pause", "r1", "--reason", HOSTILE, now=T0)

    every_run = docket("status", now=T0).stdout
    one_run = docket("status", "r1", now=T0).stdout
    log = docket("log", now=T0).stdout
    for shown in (every_run, one_run, log):
        assert not DANGEROUS.search(shown), shown
        assert "\\u202e" in shown
    for shown in (every_run, one_run):
        assert "\\x1b[2J" in shown and "\\x07" in shown and "\\x9b" in shown
    assert "\\u001b[2J" in log and "\\u0007" in log and "\\x9b" in log  # JSON payloads keep JSON's own escapes
    assert len(every_run.splitlines()) == 2  # the header and r1: no forged run line
    # r1, its status, its spend, its task
    assert len(one_run.splitlines()) == 4 and one_run.splitlines()[2].startswith("  spend: ")
    assert len(log.splitlines()) == docket("log", "--json").json()["head"]

    assert docket("status", "r1", "--json", now=T0).json()["run"]["goal"] == HOSTILE
    assert docket("status", "r1", "--json", now=T0).json()["tasks"][0]["title"] == HOSTILE
    payloads = [e["payload"] for e in docket("log", "--json").json()["events"]]
    assert [p["goal"] for p in payloads if "goal" in p] == [HOSTILE]
    assert [p["reason"] for p in payloads if "reason" in p] == [HOSTILE]


@pytest.mark.parametrize("as_json", [False, True])
def test_an_error_quoting_a_hostile_value_is_one_escaped_line(shared, as_json):
    result = shared("status", "r\n\x1b]0;pwned\x07\u202ex", *(["--json"] if as_json else []), check=False)
    assert result.returncode == 5
    match = ERROR_LINE.fullmatch(result.stderr)
    assert match and match.group(1) == "run-not-found", result.stderr
    assert not DANGEROUS.search(result.stderr)
    assert "\\n" in match.group(2) and "\\x1b]0;pwned\\x07\\u202ex" in match.group(2)
    if as_json:
        assert result.json() == {"error": {"code": "run-not-found", "message": match.group(2)}}
