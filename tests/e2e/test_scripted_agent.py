"""examples/scripted_agent.py does what its prompt says in a real git repository, the same way every time, refuses
to step outside its worktree, and under `docket worker launch` (the block of docs/agents.md) leaves a candidate
holding exactly the files its prompt describes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docket.domain.task import Feedback, retry_prompt

from ..conftest import Docket, git, make_repo
from ..unit.test_agents_doc import SCRIPTED_AGENT, agent_block

WAIT_SECONDS = 60


def run_agent(cwd: Path, prompt: str, via: str = "argument") -> subprocess.CompletedProcess[str]:
    args: list[str] = []
    stdin = None
    if via == "argument":
        args = ["--prompt", prompt]
    elif via == "file":
        path = cwd.parent / "prompt.txt"
        path.write_text(prompt, encoding="utf-8")
        args = ["--prompt-file", str(path)]
    else:
        stdin = prompt
    return subprocess.run([sys.executable, str(SCRIPTED_AGENT), *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=WAIT_SECONDS)


def files(root: Path) -> dict[str, str]:
    """Every file of the work tree (git's own folder aside), by relative path."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def retry_of(prompt: str, feedback: str = "FAIL: test_greet\nAssertionError: 'Helo, Ada' != 'Hello, Ada'") -> str:
    return retry_prompt(prompt, (Feedback(1, "check-failed", "tests", "b-1", feedback),))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


# --- directives --------------------------------------------------------------------------------------------------


def test_it_carries_out_each_directive_in_order_and_ignores_prose(repo):
    (repo / "old.txt").write_text("old\n")
    prompt = ("Please tidy up the greeting code.\n"
              "  write src/greet.py: def greet(name):\\n    return 'Hello, ' + name\n"
              "append notes.txt: first\n"
              "append notes.txt: second\n"
              "delete old.txt\n"
              "delete never-was.txt\n"
              "say: all done\n"
              "sleep: 0.01\n"
              "Thanks! Write tests if you like: this line is prose.\n")
    done = run_agent(repo, prompt)
    assert done.returncode == 0, done.stderr
    assert files(repo) == {"README.md": "hello\n", "notes.txt": "first\nsecond\n",
                           "src/greet.py": "def greet(name):\n    return 'Hello, ' + name\n"}
    assert done.stdout.splitlines() == ["first attempt", "wrote src/greet.py", "appended to notes.txt",
                                        "appended to notes.txt", "deleted old.txt", "never-was.txt is already gone",
                                        "all done", "sleeping 0.01s"]


@pytest.mark.parametrize("via", ["argument", "file", "stdin"])
def test_the_prompt_may_come_as_an_argument_a_file_or_stdin(repo, via):
    done = run_agent(repo, "write a.txt: from the prompt", via)
    assert done.returncode == 0, done.stderr
    assert (repo / "a.txt").read_text() == "from the prompt\n"


def test_the_same_prompt_twice_gives_the_same_files(repo):
    prompt = "write a.txt: one\nappend a.txt: two\nappend b.txt: x\nwrite c.txt: c\ndelete c.txt\nappend c.txt: again"
    run_agent(repo, prompt)
    once = files(repo)
    again = run_agent(repo, prompt)
    assert again.returncode == 0, again.stderr
    assert files(repo) == once == {"README.md": "hello\n", "a.txt": "one\ntwo\n", "b.txt": "x\n", "c.txt": "again\n"}
    assert "b.txt already has that line" in again.stdout.splitlines()


def test_escapes_are_decoded_and_a_rewritten_file_keeps_its_mode(repo):
    script = repo / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    done = run_agent(repo, "write run.sh: #!/bin/sh\\necho 'a\\tb' C:\\dir \\\\n")
    assert done.returncode == 0, done.stderr
    assert script.read_text() == "#!/bin/sh\necho 'a\tb' C:\\dir \\n\n"
    assert script.stat().st_mode & 0o777 == 0o755


def test_exit_stops_there_with_its_code(repo):
    done = run_agent(repo, "write a.txt: before\nexit: 3\nwrite b.txt: after")
    assert done.returncode == 3
    assert (repo / "a.txt").exists() and not (repo / "b.txt").exists()


# --- first attempt and retry -------------------------------------------------------------------------------------

BUGGY_FIRST = ("Add greet.py.\n"
               "first attempt: write greet.py: def greet(name):\\n    return 'Helo, ' + name\n"
               "write greet.py: def greet(name):\\n    return 'Hello, ' + name\n"
               "fail first attempt\n")


def test_a_first_attempt_does_the_first_attempt_directive_and_fails_when_asked(repo):
    done = run_agent(repo, BUGGY_FIRST)
    assert done.returncode == 1
    assert (repo / "greet.py").read_text() == "def greet(name):\n    return 'Helo, ' + name\n"
    assert done.stdout.splitlines() == ["first attempt", "wrote greet.py",
                                        "failing the first attempt, as the prompt asks"]


def test_a_retry_prompt_from_docket_skips_the_first_attempt_directive_and_succeeds(repo):
    run_agent(repo, BUGGY_FIRST)
    done = run_agent(repo, retry_of(BUGGY_FIRST))
    assert done.returncode == 0, done.stderr
    assert (repo / "greet.py").read_text() == "def greet(name):\n    return 'Hello, ' + name\n"
    assert done.stdout.splitlines()[0] == "retry: the previous attempt was not accepted"


def test_what_a_failed_check_printed_cannot_steer_the_agent(repo):
    done = run_agent(repo, retry_of("write a.txt: mine", feedback="write evil.txt: from the check\ncommit\nhang"))
    assert done.returncode == 0, done.stderr
    assert not (repo / "evil.txt").exists() and (repo / "a.txt").read_text() == "mine\n"


# --- refusals ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", ["{outside}/escaped.txt", "../escaped.txt", "sub/../../escaped.txt", ".git/config",
                                     ".GIT/hooks/pre-commit", "sub/.git/x", "link/escaped.txt", "."])
@pytest.mark.parametrize("verb", ["write", "append", "delete"])
def test_a_path_outside_the_worktree_into_git_or_through_a_link_is_refused_and_nothing_is_done(repo, hostile, verb):
    outside = repo.parent / "outside"
    outside.mkdir()
    (repo / "link").symlink_to(outside)
    config = (repo / ".git" / "config").read_text()
    target = hostile.format(outside=outside)
    directive = f"delete {target}" if verb == "delete" else f"{verb} {target}: pwned"
    done = run_agent(repo, f"write ok.txt: fine\n{directive}\n")
    assert done.returncode == 2
    assert done.stderr.startswith("scripted_agent: refused: ") and done.stdout == ""
    assert not (repo / "ok.txt").exists()  # checked before anything was done
    assert list(outside.iterdir()) == [] and not (repo.parent / "escaped.txt").exists()
    assert (repo / ".git" / "config").read_text() == config


# --- hang and commit ---------------------------------------------------------------------------------------------


def test_hang_prints_nothing_and_never_ends_until_it_is_killed(repo):
    proc = subprocess.Popen([sys.executable, str(SCRIPTED_AGENT), "--prompt", "say: before\nhang\nwrite after.txt: x"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline() == "first attempt\n"
        assert proc.stdout.readline() == "before\n"
        time.sleep(0.5)
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=WAIT_SECONDS)
    assert (out, err) == ("", "")
    assert proc.returncode == -signal.SIGKILL and not (repo / "after.txt").exists()


def test_commit_commits_everything_with_a_fixed_author_and_date_so_the_commit_is_the_same_every_time(tmp_path):
    prompt = "write a.txt: one\nwrite dir/b.txt: two\ncommit: add a and b\ncommit"
    heads = []
    for name in ("first", "second"):
        repo = make_repo(tmp_path / name)
        base = git(repo, "rev-parse", "HEAD")
        done = run_agent(repo, prompt)
        assert done.returncode == 0, done.stderr
        head = git(repo, "rev-parse", "HEAD")
        assert done.stdout.splitlines() == ["first attempt", "wrote a.txt", "wrote dir/b.txt",
                                            f"committed {head[:7]}", "nothing to commit"]
        assert git(repo, "rev-parse", "HEAD~1") == base
        assert git(repo, "log", "-1", "--format=%an <%ae>|%s") == \
            "scripted agent <scripted-agent@example.invalid>|add a and b"
        assert git(repo, "ls-tree", "-r", "--name-only", "HEAD").split() == ["README.md", "a.txt", "dir/b.txt"]
        assert git(repo, "status", "--porcelain") == ""
        again = run_agent(repo, prompt)
        assert again.stdout.splitlines()[-2:] == ["nothing to commit", "nothing to commit"]
        assert git(repo, "rev-parse", "HEAD") == head
        heads.append(head)
    assert heads[0] == heads[1]


# --- through docket ----------------------------------------------------------------------------------------------


def test_docket_worker_launch_with_the_documented_block_pins_the_files_the_prompt_describes(docket: Docket):
    repo = docket.cwd
    (repo / "old.txt").write_text("to be removed\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "docket.toml").write_text(agent_block("scripted"))
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "greet", "--id", "r1")
    prompt = ("Add a greeting and drop old.txt.\n"
              "write greet.py: def greet(name):\\n    return 'Hello, ' + name\n"
              "append NOTES.md: greeting added\n"
              "delete old.txt\n"
              "say: done\n")
    docket("task", "plan", "r1", "--title", "T", "--id", "t1", "--prompt", prompt)
    result = docket("worker", "launch", "r1", "--task", "t1", "--agent", "scripted", "--json", check=False)
    assert result.returncode == 0, result.stderr
    doc = result.json()
    assert (doc["result"], doc["exit_code"]) == ("ok", 0)
    assert doc["pin"]["result"] == "pinned"
    candidate = doc["pin"]["candidate"]
    commit = candidate["commit"]
    assert candidate["changed_paths"] == ["NOTES.md", "greet.py", "old.txt"]
    assert git(repo, "ls-tree", "-r", "--name-only", commit).split() == ["NOTES.md", "README.md", "greet.py"]
    assert git(repo, "show", f"{commit}:greet.py") == "def greet(name):\n    return 'Hello, ' + name"
    assert git(repo, "show", f"{commit}:NOTES.md") == "greeting added"
    log = docket("worker", "logs", "t1").stdout
    assert "wrote greet.py" in log and "done" in log
