"""Checks through the real CLI: `docket check run` against a candidate pinned by a real worker's exit, each check in
its own execution worktree, its result bound to the candidate and to its configuration, its artifacts copied back
safely; afterwards real git agrees that nothing is left (`git worktree list`, `git fsck --strict`)."""

from __future__ import annotations

from docket.adapters.world.workspaces.data_owners import OWNERS_FILE
from docket.adapters.world.workspaces.execution_pool import POOL, idle_only
from docket.adapters.world.files.paths import executions_root
import hashlib
import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from docket.domain.kernel.canonical import canonical_json
from docket.domain.config import SHELL

from ..conftest import Docket, git
from .test_workers import Workers

RESULTS = ("CheckPassed.v1", "CheckFailed.v1", "CheckTimedOut.v1")


class Checks(Workers):
    """A repository whose task t1 was worked on by a real worker; its exit pinned the candidate checks run on."""

    def __init__(self, docket: Docket):
        super().__init__(docket)
        self.config('artifact_dir = "out"\n')
        self.plan("t1")
        result = self.launch("t1", "--", "sh", "-c", "echo more >> a.txt; echo new > new.txt")
        assert result.returncode == 0, result.stderr
        self.candidate = result.json()["pin"]["candidate"]
        self.binding = self.candidate["binding_id"]

    def checks(self, **checks: dict) -> None:
        """docket.toml with artifact_dir = "out" and these [checks.NAME] (values as TOML-compatible JSON)."""
        text = 'artifact_dir = "out"\n'
        for name, settings in checks.items():
            text += f"\n[checks.{name}]\n" + "".join(f"{key} = {json.dumps(value)}\n"
                                                    for key, value in settings.items())
        self.config(text)

    def run(self, *names: str, key: str | None = None) -> tuple[int, dict]:
        options = [option for name in names for option in ("--check", name)]
        result = self.docket("check", "run", key or self.binding, *options, "--json", check=False)
        assert result.returncode in (0, 6, 7), result.stderr
        return result.returncode, result.json()

    def results(self) -> list[dict]:
        found = [(e["position"], e["type"], e["payload"]) for t in RESULTS
                 for e in self.docket("log", "--json", "--type", t).json()["events"]]
        return [{**payload, "type": type_name} for _, type_name, payload in sorted(found, key=lambda f: f[0])]

    def check_processes(self) -> list[psutil.Process]:
        """Processes still alive with this candidate's DOCKET_CHECK in their environment."""
        alive = []
        for p in psutil.process_iter():
            try:
                env = p.environ()
                if "DOCKET_CHECK" in env and env.get("DOCKET_CANDIDATE") == self.binding \
                        and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except (psutil.Error, OSError):
                continue
        return alive

    def assert_nothing_left(self, *, dangling: bool = False) -> None:
        """No execution worktree registered or on disk (empty parent folders aside); git finds nothing wrong
        (dangling: objects a check made itself, unreferenced, are all git may mention)."""
        repo = self.docket.cwd
        assert "/docket/executions/" not in git(repo, "worktree", "list", "--porcelain")
        executions = executions_root(repo / ".git")
        own = (POOL, OWNERS_FILE)  # the pool, and the record of whose the folder is
        left = sorted(p for p in executions.rglob("*") if p.relative_to(executions).parts[0] not in own) \
            if executions.exists() else []
        assert idle_only(executions / POOL)  # executions given back to the pool, none left placed
        # parents <run>/<binding> may stay, empty; an execution <run>/<binding>/<check>-<attempt> may not
        assert all(p.is_dir() and not p.is_symlink() and len(p.relative_to(executions).parts) <= 2 for p in left), left
        assert all(not any(p.is_file() for p in d.iterdir()) for d in left)
        found = git(repo, "fsck", "--strict").splitlines()  # git() raises on a non-zero exit
        assert [line for line in found if not (dangling and line.startswith("dangling "))] == []
        assert self.check_processes() == []


@pytest.fixture
def checks(docket: Docket):
    (docket.cwd / "a.txt").write_text("alpha\n")
    git(docket.cwd, "add", "-A")
    git(docket.cwd, "commit", "-q", "-m", "base")
    w = Checks(docket)
    try:
        yield w
    finally:
        w.stop_everything()


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def error_line(result, code: str) -> None:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"docket: error: {code}: "), result.stderr


# --- results -------------------------------------------------------------------------------------------------------


def test_a_passing_check_runs_at_exactly_the_candidate_commit_and_leaves_nothing_behind(checks):
    checks.checks(ok={"command": sh('test "$(git rev-parse HEAD)" = "$DOCKET_COMMIT" && git status --porcelain '
                                    '&& cat new.txt && echo "checked $DOCKET_CHECK"')})
    code, doc = checks.run()
    assert code == 0
    assert doc["binding_id"] == checks.binding and doc["commit"] == checks.candidate["commit"]
    (outcome,) = doc["checks"]
    assert (outcome["check"], outcome["attempt"], outcome["result"], outcome["execution_state"]) == (
        "ok", 1, "passed", "removed")
    assert outcome["tail"] == "new\nchecked ok"  # a clean worktree holding the candidate's files
    (result,) = checks.results()
    assert result["type"] == "CheckPassed.v1" and result["execution"] == "matching"
    assert result["binding_id"] == checks.binding
    (requested,) = checks.events("CheckRequested.v1")
    assert result["config_sha256"] == requested["config_sha256"] and requested["commit"] == checks.candidate["commit"]
    log = Path(outcome["log_path"]).read_bytes()
    assert result["output_sha256"] == hashlib.sha256(log).hexdigest() == outcome["output_sha256"]
    checks.assert_nothing_left()


def test_a_failing_check_records_its_exit_code_and_tail_and_exits_6(checks):
    checks.checks(bad={"command": sh("echo first; echo broken >&2; exit 3")})
    code, doc = checks.run()
    assert code == 6
    (outcome,) = doc["checks"]
    assert (outcome["result"], outcome["code"], outcome["exit_code"], outcome["signal"]) == ("failed", "exit", 3, None)
    (result,) = checks.results()
    assert (result["type"], result["code"], result["exit_code"], result["signal"]) == ("CheckFailed.v1", "exit", 3, None)
    assert result["tail"] == "first\nbroken" == outcome["tail"]
    assert result["binding_id"] == checks.binding
    human = checks("check", "run", checks.binding, check=False)
    assert human.returncode == 6 and "bad #2: failed (exit, exit code 3)" in human.stdout and "broken" in human.stdout
    checks.assert_nothing_left()


def test_a_check_killed_by_a_signal_records_the_signal(checks):
    checks.checks(killed={"command": sh("echo dying; kill -KILL $$")})
    code, doc = checks.run()
    assert code == 6
    (result,) = checks.results()
    assert (result["type"], result["code"], result["exit_code"], result["signal"]) == (
        "CheckFailed.v1", "signal", None, 9)
    assert result["tail"] == "dying"
    checks.assert_nothing_left()


def test_a_check_past_its_timeout_is_stopped_with_its_whole_group_and_exits_7(checks):
    checks.checks(slow={"command": sh("echo started; sleep 600 & sleep 600"), "timeout": "1s"})
    code, doc = checks.run()
    assert code == 7
    (outcome,) = doc["checks"]
    assert (outcome["result"], outcome["code"]) == ("timed-out", "timeout")
    (result,) = checks.results()
    assert (result["type"], result["cause"], result["timeout_ms"]) == ("CheckTimedOut.v1", "timeout", 1000)
    assert result["binding_id"] == checks.binding and result["tail"] == "started"
    checks.assert_nothing_left()  # no process with DOCKET_CHECK in its environment either


def test_a_check_silent_past_its_idle_timeout_is_stopped_but_one_that_prints_is_not(checks):
    checks.checks(silent={"command": sh("echo started; sleep 600"), "timeout": "1m", "idle_timeout": "1s"},
                  talking={"command": sh("for i in 1 2 3 4 5 6; do echo tick; sleep 0.4; done"), "timeout": "1m",
                           "idle_timeout": "1s"})
    code, doc = checks.run()
    assert code == 7
    outcomes = {o["check"]: (o["result"], o["code"]) for o in doc["checks"]}
    assert outcomes == {"silent": ("timed-out", "idle-timeout"), "talking": ("passed", None)}
    checks.assert_nothing_left()


@pytest.mark.parametrize("script", ["echo changed >> a.txt", "rm a.txt", "chmod +x a.txt",
                                    "git -c user.name=c -c user.email=c@example.com commit -q --allow-empty -m c"],
                         ids=["tracked-modified", "tracked-deleted", "tracked-mode", "head-moved"])
def test_a_check_that_mutates_its_execution_fails_even_when_its_command_passed(checks, script):
    checks.checks(mutating={"command": sh(f"{script} && mkdir -p out && echo fine > out/ok.txt")})
    code, doc = checks.run()
    assert code == 6
    (result,) = checks.results()
    assert (result["type"], result["code"], result["execution"], result["exit_code"]) == (
        "CheckFailed.v1", "execution-mutated", "mutated", 0)
    assert result["artifacts"] == []  # nothing is copied from a mutated execution
    assert not (checks.worktree("t1") / "out").exists()
    checks.assert_nothing_left(dangling=script.startswith("git"))


@pytest.mark.parametrize("script", ["echo stray > stray.txt", "mkdir -p build && echo stray > build/x.o",
                                    "mkdir -p __pycache__ && echo pyc > __pycache__/m.cpython-311.pyc",
                                    "echo '*' > .gitignore.new && mkdir -p .cache && mv .gitignore.new .cache/.gitignore"],
                         ids=["untracked-file", "untracked-folder", "bytecode", "self-ignoring-cache"])
def test_what_a_check_writes_for_itself_is_its_output_not_a_mutation(checks, script):
    checks.checks(writing={"command": sh(f"{script} && mkdir -p out && echo fine > out/ok.txt")})
    code, doc = checks.run()
    assert code == 0, doc
    (result,) = checks.results()
    assert (result["type"], result["execution"]) == ("CheckPassed.v1", "matching")
    assert [a["path"] for a in result["artifacts"]] == ["ok.txt"]  # the artifact folder is still copied back
    assert not (checks.worktree("t1") / "stray.txt").exists()  # and only it
    checks.assert_nothing_left()


def test_shell_true_runs_the_one_script_with_the_shell(checks):
    script = 'echo "shell-$((40 + 2))" && test "$DOCKET_CHECK" = sh'
    checks.checks(sh={"shell": True, "command": [script]})
    code, doc = checks.run()
    assert code == 0, doc
    assert doc["checks"][0]["tail"] == "shell-42"
    (requested,) = checks.events("CheckRequested.v1")
    assert requested["argv_sha256"] == hashlib.sha256(canonical_json([SHELL, "-c", script])).hexdigest()
    checks.assert_nothing_left()


def test_a_check_sees_no_credential_unless_allowed_and_its_docket_variables(checks):
    secrets = {"MY_API_TOKEN": "abc123", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
               "INNOCENT_LOOKING": "sk-" + "a1B2c3D4" * 5, "GITHUB_TOKEN": "ghp_" + "x" * 36}
    checks.docket.env.update(secrets, ALLOWED_API_KEY="let-me-through", PLAIN_SETTING="kept",
                             DOCKET_FAULT_NOWHERE="docket's own")
    dump = "import json, os; os.makedirs('out', exist_ok=True); json.dump(dict(os.environ), open('out/env.json', 'w'))"
    checks.checks(env={"command": [sys.executable, "-c", dump], "env_allow": ["ALLOWED_API_KEY"]})
    code, doc = checks.run()
    assert code == 0, doc
    env = json.loads((checks.worktree("t1") / "out" / "env.json").read_text())
    assert not set(secrets) & set(env), sorted(set(secrets) & set(env))
    assert not any(value in env.values() for value in secrets.values())
    assert env["ALLOWED_API_KEY"] == "let-me-through" and env["PLAIN_SETTING"] == "kept"
    assert "DOCKET_FAULT_NOWHERE" not in env
    assert (env["DOCKET_CHECK"], env["DOCKET_CANDIDATE"], env["DOCKET_COMMIT"]) == (
        "env", checks.binding, checks.candidate["commit"])
    checks.assert_nothing_left()


def test_check_names_only_the_checks_given_and_every_configured_one_without(checks):
    checks.checks(a={"command": ["true"]}, b={"command": sh("echo b")}, c={"command": ["false"], "required": False})
    code, doc = checks.run("b")
    assert code == 0 and [o["check"] for o in doc["checks"]] == ["b"]
    assert [e["check"] for e in checks.events("CheckRequested.v1")] == ["b"]
    code, doc = checks.run()
    assert code == 6 and [(o["check"], o["attempt"], o["result"]) for o in doc["checks"]] == [
        ("a", 1, "passed"), ("b", 2, "passed"), ("c", 1, "failed")]
    checks.assert_nothing_left()


def test_attempts_count_up_and_every_result_is_bound_to_the_candidate_and_the_configuration_digest(checks):
    checks.checks(ok={"command": sh("echo one"), "timeout": "60s"})
    checks.run()
    checks.checks(ok={"command": sh("echo one"), "timeout": "1m"})  # another spelling of the same configuration
    checks.run()
    checks.checks(ok={"command": sh("echo two"), "timeout": "1m"})
    checks.run()
    requested = checks.events("CheckRequested.v1")
    results = checks.results()
    assert [r["attempt"] for r in requested] == [1, 2, 3]
    assert [Path(r["execution"]).name for r in requested] == ["ok-1", "ok-2", "ok-3"]
    assert len({r["check_id"] for r in requested}) == 3
    assert [r["check_id"] for r in results] == [r["check_id"] for r in requested]
    assert {r["binding_id"] for r in results} == {checks.binding}
    digests = [r["config_sha256"] for r in results]
    assert digests == [r["config_sha256"] for r in requested]
    assert digests[0] == digests[1] != digests[2]
    checks.assert_nothing_left()


# --- artifacts -----------------------------------------------------------------------------------------------------


def test_an_artifact_is_copied_back_to_the_task_worktree_with_its_digest(checks):
    checks.checks(report={"command": sh("mkdir -p out/deep && echo report > out/report.txt && "
                                        "echo deeper > out/deep/more.txt")})
    code, doc = checks.run()
    assert code == 0, doc
    out = checks.worktree("t1") / "out"
    expected = [{"path": p, "sha256": hashlib.sha256((out / p).read_bytes()).hexdigest(),
                 "size": (out / p).stat().st_size} for p in ("deep/more.txt", "report.txt")]
    assert (out / "report.txt").read_text() == "report\n"
    (result,) = checks.results()
    assert sorted(result["artifacts"], key=lambda a: a["path"]) == expected
    assert sorted(doc["checks"][0]["artifacts"], key=lambda a: a["path"]) == expected
    # the artifact directory stays out of the candidate: pinning again finds the same capture
    again = checks("candidate", "pin", "r1", "--task", "t1", "--json").json()
    assert again["binding_id"] == checks.binding
    checks.assert_nothing_left()


def _outside(tmp_path: Path, repo: Path) -> dict[str, tuple[int, int]]:
    """Everything under tmp_path outside the repository: path -> (size, mtime_ns)."""
    seen = {}
    for p in tmp_path.rglob("*"):
        if p == repo or repo in p.parents:
            continue
        st = p.lstat()
        seen[str(p)] = (st.st_size, st.st_mtime_ns)
    return seen


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_a_symlink_planted_under_the_artifact_directory_is_refused_and_nothing_outside_is_touched(
        checks, tmp_path, planted):
    repo = checks.docket.cwd
    secret = tmp_path / "outside.txt"
    secret.write_text("not yours\n")
    folder = tmp_path / "outside-folder"
    folder.mkdir()
    target = secret if planted == "file" else folder
    checks.checks(plant={"command": sh(f"mkdir -p out && echo fine > out/fine.txt && ln -s '{target}' out/report")})
    before = _outside(tmp_path, repo)
    code, doc = checks.run()
    assert code == 6
    (result,) = checks.results()
    assert (result["type"], result["code"]) == ("CheckFailed.v1", "artifact-symlink")
    assert _outside(tmp_path, repo) == before and secret.read_text() == "not yours\n" and not any(folder.iterdir())
    out = checks.worktree("t1") / "out"
    assert not os.path.lexists(out / "report")
    checks.assert_nothing_left()


def test_an_artifact_replaces_the_report_an_earlier_check_run_left(checks):
    out = checks.worktree("t1") / "out"
    out.mkdir()
    (out / "report.txt").write_text("the last cycle's\n")
    checks.checks(report={"command": sh("mkdir -p out && echo this > out/report.txt")})
    code, doc = checks.run()
    assert code == 0, doc
    (result,) = checks.results()
    assert result["type"] == "CheckPassed.v1"
    assert (out / "report.txt").read_text() == "this\n"
    assert sorted(p.name for p in out.iterdir()) == ["report.txt"]  # no temporary file left either
    checks.assert_nothing_left()


def test_an_artifact_where_the_worktree_has_a_folder_is_a_conflict_and_the_folder_is_kept(checks):
    out = checks.worktree("t1") / "out"
    (out / "report.txt").mkdir(parents=True)
    (out / "report.txt" / "mine").write_text("mine\n")
    checks.checks(report={"command": sh("mkdir -p out && echo theirs > out/report.txt")})
    code, doc = checks.run()
    assert code == 6
    (result,) = checks.results()
    assert (result["type"], result["code"]) == ("CheckFailed.v1", "artifact-conflict")
    assert (out / "report.txt" / "mine").read_text() == "mine\n"
    assert sorted(p.name for p in out.iterdir()) == ["report.txt"]  # no temporary file left either
    checks.assert_nothing_left()


def _pinned_with_a_tracked_artifact(checks: Checks) -> dict:
    """Task t2's candidate: its agent committed out/kept.txt, so the candidate's tree holds a file under out/."""
    checks.plan("t2")
    result = checks.launch("t2", "--", "sh", "-c", "mkdir out && echo kept > out/kept.txt && git add out/kept.txt && "
                                                   "git -c user.name=a -c user.email=a@example.com commit -q -m kept")
    assert result.returncode == 0, result.stderr
    return result.json()["pin"]["candidate"]


def test_a_tracked_file_under_the_artifact_directory_is_no_artifact(checks):
    candidate = _pinned_with_a_tracked_artifact(checks)
    checks.checks(report={"command": sh("echo report > out/report.txt")})
    code, doc = checks.run(key=candidate["binding_id"])
    assert code == 0, doc
    assert [a["path"] for a in doc["checks"][0]["artifacts"]] == ["report.txt"]


def test_a_tracked_file_edited_after_the_pin_does_not_fail_a_check_that_never_wrote_it(checks):
    candidate = _pinned_with_a_tracked_artifact(checks)
    (checks.worktree("t2") / "out" / "kept.txt").write_text("edited since\n")
    checks.checks(report={"command": sh("echo report > out/report.txt")})
    code, doc = checks.run(key=candidate["binding_id"])
    assert (code, doc["checks"][0]["result"], doc["checks"][0]["code"]) == (0, "passed", None)
    assert (checks.worktree("t2") / "out" / "kept.txt").read_text() == "edited since\n"


# --- refused input -------------------------------------------------------------------------------------------------


def test_an_unknown_check_is_not_found_and_no_checks_is_a_usage_error(checks):
    checks.checks(ok={"command": ["true"]})
    result = checks("check", "run", checks.binding, "--check", "nope", check=False)
    assert result.returncode == 5
    error_line(result, "check-not-found")
    checks.config('artifact_dir = "out"\n')
    result = checks("check", "run", checks.binding, check=False)
    assert result.returncode == 2
    error_line(result, "no-checks")
    assert checks.events("CheckRequested.v1") == []


@pytest.mark.parametrize("key", ["not-hex!", "abc1234", "ABCDEF0123456789"])
def test_check_run_refuses_a_key_that_is_no_binding_id(checks, key):
    checks.checks(ok={"command": ["true"]})
    result = checks("check", "run", key, check=False)
    assert result.returncode == 2
    error_line(result, "bad-candidate")


def test_a_released_candidate_is_not_checked(checks):
    checks.checks(ok={"command": ["true"]})
    checks("candidate", "release", checks.binding)
    result = checks("check", "run", checks.binding, "--json", check=False)
    assert result.returncode == 3
    error_line(result, "candidate-not-pinned")
    assert checks.events("CheckRequested.v1") == []
    checks.assert_nothing_left()


def test_a_released_candidate_is_refused_in_one_stderr_line(checks):
    checks.checks(ok={"command": ["true"]})
    checks("candidate", "release", checks.binding)
    result = checks("check", "run", checks.binding, check=False)
    assert result.returncode == 3
    error_line(result, "candidate-not-pinned")


def test_a_check_is_found_by_the_candidate_commit(checks):
    pytest.importorskip("docket.projections.candidates", reason="projections/candidates.py is another helper's work")
    checks.checks(ok={"command": ["true"]})
    code, doc = checks.run(key=checks.candidate["commit"])
    assert code == 0 and doc["binding_id"] == checks.binding
    code, doc = checks.run(key=checks.binding[:10])
    assert code == 0 and doc["checks"][0]["attempt"] == 2
