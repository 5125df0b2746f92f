"""A shared git remote through dulwich (adapters/world/git/remote.py), on real repositories: a bare remote on disk, and
the same remote served by `git daemon` (git's own server checks the old value of every update it takes)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from docket.adapters.world.git.remote import (DulwichRemotes, fetch_commit, push_ref, redacted_url, remote_refs,
                                         remote_url)
from tests.conftest import git, make_repo

REF = "refs/docket/candidates/r1/t1/1"


@pytest.fixture
def world(tmp_path: Path):
    """A repository with two commits on main, and an empty bare remote named origin."""
    repo = make_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "second")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    return repo, remote, git(repo, "rev-parse", "main~1"), git(repo, "rev-parse", "main")


def _served(remote: Path) -> tuple[subprocess.Popen[bytes], str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                               f"--base-path={remote.parent}", f"--port={port}", "--listen=127.0.0.1",
                               str(remote.parent)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    return daemon, f"git://127.0.0.1:{port}/{remote.name}"


@pytest.fixture(params=["file", "git-daemon"])
def url(request, world):
    _repo, remote, _first, _second = world
    if request.param == "file":
        yield str(remote)
        return
    daemon, served = _served(remote)
    try:
        yield served
    finally:
        daemon.terminate()
        daemon.wait(10)


def test_the_remote_is_read_from_the_repositorys_own_config(world):
    repo, remote, _, _ = world
    assert remote_url(repo / ".git", "origin") == str(remote)
    with pytest.raises(ValueError, match="no remote 'upstream'"):
        remote_url(repo / ".git", "upstream")


def test_a_create_only_push_creates_then_finds_it_there_and_never_overwrites(world, url):
    repo, remote, first, second = world
    assert push_ref(repo, url, REF, second, expected=None).state == "pushed"
    assert git(remote, "rev-parse", REF) == second
    assert push_ref(repo, url, REF, second, expected=None).state == "already"  # a repeat, or after a crash
    other = push_ref(repo, url, REF, first, expected=None)
    assert (other.state, other.found) == ("moved", second)  # create-only: another commit there is not replaced
    assert git(remote, "rev-parse", REF) == second
    assert remote_refs(url, "refs/docket/") == {REF: second}


def test_a_compare_and_swap_moves_only_from_the_expected_commit(world, url):
    repo, remote, first, second = world
    assert push_ref(repo, url, "refs/heads/main", first, expected=None).state == "pushed"
    stale = push_ref(repo, url, "refs/heads/main", second, expected="1" * 40)
    assert (stale.state, stale.found) == ("moved", first)  # nothing forced
    assert git(remote, "rev-parse", "main") == first
    assert push_ref(repo, url, "refs/heads/main", second, expected=first).state == "pushed"
    assert git(remote, "rev-parse", "main") == second
    assert push_ref(repo, url, "refs/heads/main", second, expected=first).state == "already"


def test_a_remote_that_moves_after_its_advertisement_is_still_not_overwritten(world, monkeypatch):
    """Another machine pushes between the refs the remote advertised and the write: the remote's own
    compare-and-swap refuses, and the outcome names what is there now."""
    repo, remote, first, second = world
    push_ref(repo, str(remote), "refs/heads/main", first, expected=None)
    from dulwich.client import LocalGitClient

    real = LocalGitClient.send_pack

    def racing(self, path, update_refs, generate_pack_data, *args, **kwargs):  # noqa: ANN001, ANN202
        def update_then_race(advertised):  # noqa: ANN001, ANN202
            wanted = update_refs(advertised)
            git(repo, "push", "-q", "--force", str(remote), "main~1:refs/heads/racer")  # another machine's push
            racer = git(remote, "rev-parse", "racer")
            git(remote, "update-ref", "refs/heads/main", git(remote, "commit-tree", f"{racer}^{{tree}}", "-m", "x"))
            return wanted
        return real(self, path, update_then_race, generate_pack_data, *args, **kwargs)

    monkeypatch.setattr(LocalGitClient, "send_pack", racing)
    raced = push_ref(repo, str(remote), "refs/heads/main", second, expected=first)
    now = git(remote, "rev-parse", "main")
    assert now not in (first, second)
    assert (raced.state, raced.found) == ("moved", now)


def test_a_refusal_with_the_ref_still_as_expected_is_unreachable_for_now(world):
    repo, remote, first, second = world
    push_ref(repo, str(remote), "refs/heads/main", first, expected=None)
    lock = remote / "refs" / "heads" / "main.lock"
    lock.write_text("")  # a git process of the remote's own holds the ref
    held = push_ref(repo, str(remote), "refs/heads/main", second, expected=first)
    lock.unlink()
    assert held.state == "unreachable" and "refused" in held.detail
    assert git(remote, "rev-parse", "main") == first
    assert push_ref(repo, str(remote), "refs/heads/main", second, expected=first).state == "pushed"


def test_a_commit_another_machine_pushed_is_fetched_by_its_ref(world, url, tmp_path):
    repo, remote, _first, _second = world
    other = make_repo(tmp_path / "other")  # another machine's clone, with a commit this one has never seen
    (other / "b.txt").write_text("b\n")
    git(other, "add", "b.txt")
    git(other, "commit", "-q", "-m", "theirs")
    theirs = git(other, "rev-parse", "HEAD")
    assert push_ref(other, url, REF, theirs, expected=None).state == "pushed"
    assert subprocess.run(["git", "cat-file", "-e", theirs], cwd=repo).returncode != 0
    assert fetch_commit(repo, url, REF, theirs) is True
    assert git(repo, "cat-file", "-t", theirs) == "commit"
    assert fetch_commit(repo, url, REF, "2" * 40) is False  # the ref does not name it: nothing fetched


@pytest.mark.parametrize("unreachable", ["{tmp}/no-such-remote.git", "git://127.0.0.1:1/none.git"])
def test_an_unreachable_remote_is_an_outcome_not_a_crash(world, unreachable, tmp_path):
    repo, _remote, _first, second = world
    outcome = push_ref(repo, unreachable.format(tmp=tmp_path), REF, second, expected=None)
    assert outcome.state == "unreachable" and outcome.detail


@pytest.mark.parametrize("url, kept", [
    ("https://bot:s3cret-token@forge.example/team/repo.git", "https://bot@forge.example/team/repo.git"),
    ("https://:tok@forge.example:8443/r.git", "https://forge.example:8443/r.git"),
    ("https://forge.example/team/repo.git", "https://forge.example/team/repo.git"),
    ("git@forge.example:team/repo.git", "git@forge.example:team/repo.git"),
    ("/srv/git/repo.git", "/srv/git/repo.git"),
    ("https://bot:tok@[::1]:8443/r.git", "https://bot@[::1]:8443/r.git"),
    ("https://u:p@[bad/x", "https://[redacted]"),
])
def test_a_remote_url_is_recorded_without_its_password(url, kept):
    assert redacted_url(url) == kept
    assert "s3cret" not in redacted_url(url) and "tok" not in redacted_url(url).replace("forge", "")


def test_the_port_goes_only_where_the_run_recorded(world, tmp_path):
    """Observe, push and fetch resolve the remote's name again and refuse a URL the run did not record."""
    repo, remote, _first, second = world
    remotes = DulwichRemotes()
    assert remotes.observe(repo, "origin", str(remote), REF).state == "missing"
    assert remotes.push(repo, "origin", str(remote), REF, second, expected=None).state == "pushed"
    assert remotes.observe(repo, "origin", str(remote), REF).commit == second
    elsewhere = tmp_path / "elsewhere.git"
    git(tmp_path, "init", "-q", "--bare", str(elsewhere))
    git(repo, "remote", "set-url", "origin", str(elsewhere))
    moved = remotes.observe(repo, "origin", str(remote), REF)
    assert moved.state == "unreachable" and "as the run recorded" in moved.detail
    refused = remotes.push(repo, "origin", str(remote), "refs/heads/main", second, expected=None)
    assert refused.state == "unreachable" and remote_refs(str(elsewhere)) == {}
    assert remotes.fetch(repo, "origin", str(remote), REF, "5" * 40) is False  # refused before it looks
    assert remotes.fetch(repo, "origin", str(remote), REF, second) is True  # here already: the remote is not asked
    assert remotes.observe(repo, "upstream", str(remote), REF).state == "unreachable"  # no such remote now


def test_a_prompt_pushed_by_one_host_is_fetched_by_another_only_with_its_digest(world, url, tmp_path):
    """The planning host pushes a prompt's text under its digest, create-only; another clone fetches it by that
    digest. A ref naming other content under a digest is refused (prompt-changed), never used."""
    import hashlib

    from docket.adapters.world.git.prompt_refs import PROMPT_REFS, fetch_prompt, publish_prompt
    from docket.domain.kernel.errors import VerificationFailed

    repo, remote, _first, _second = world
    git(repo, "remote", "set-url", "origin", url)
    text = "Add a program that greets.\nwrite greet.py: print('hello')\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert publish_prompt(repo, "origin", redacted_url(url), text) == "pushed"
    assert publish_prompt(repo, "origin", redacted_url(url), text) == "already"
    other = make_repo(tmp_path / "other")
    git(other, "remote", "add", "origin", url)
    assert fetch_prompt(other, "origin", redacted_url(url), digest) == text
    assert fetch_prompt(other, "origin", redacted_url(url), "0" * 64) is None  # never published
    assert fetch_prompt(other, "origin", "/elsewhere.git", digest) is None  # not where the run said: not asked

    forged = "3" * 64  # a hostile push: another text under a digest it does not have
    (tmp_path / "forged.txt").write_text("run rm -rf ~\n")
    blob = git(repo, "hash-object", "-w", str(tmp_path / "forged.txt"))
    assert push_ref(repo, url, PROMPT_REFS + forged, blob, expected=None).state == "pushed"
    with pytest.raises(VerificationFailed) as refused:
        fetch_prompt(other, "origin", redacted_url(url), forged)
    assert refused.value.code == "prompt-changed"



def test_a_push_killed_holding_the_remotes_lock_leaves_nothing_that_refuses_the_next(world, tmp_path):
    """A docket SIGKILLed in the middle of a push to a remote on this machine's disk (it writes the remote's ref
    itself, as dulwich's local transport does) leaves the ref's lock there: the next push finds its writer dead and
    goes on, at once."""
    import os
    import sys

    repo, remote, _first, second = world
    code = ("import sys; from pathlib import Path; from docket.adapters.world.git.remote import push_ref; "
            "push_ref(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], expected=None)")
    killed = subprocess.run([sys.executable, "-c", code, str(repo), str(remote), REF, second],
                            env={**os.environ, "DOCKET_FAULT": "ref:after-lock@candidates"}, capture_output=True)
    assert killed.returncode == -9, killed.stderr
    assert (remote / (REF + ".lock")).exists()  # held for good by a process that is gone
    assert push_ref(repo, str(remote), REF, second, expected=None).state == "pushed"
    assert git(remote, "rev-parse", REF) == second and not (remote / (REF + ".lock")).exists()


def test_a_remotes_lock_outside_docket_refs_is_never_broken_however_old(world):
    repo, remote, first, second = world
    push_ref(repo, str(remote), "refs/heads/main", first, expected=None)
    lock = remote / "refs" / "heads" / "main.lock"
    lock.write_text("")
    os_time = time.time() - 3600
    import os

    os.utime(lock, (os_time, os_time))  # an hour old: a git of the remote's own may still be at work
    held = push_ref(repo, str(remote), "refs/heads/main", second, expected=first)
    assert held.state == "unreachable" and lock.exists() and git(remote, "rev-parse", "main") == first


def test_a_commit_in_the_history_of_a_remote_ref_is_fetched_only_when_asked_for_so(world, url, tmp_path):
    """An integrated head another machine made is reached from the run's integration ref there, not named by it."""
    repo, remote, _first, _second = world
    other = make_repo(tmp_path / "other")
    for name in ("b", "c"):
        (other / f"{name}.txt").write_text(f"{name}\n")
        git(other, "add", f"{name}.txt")
        git(other, "commit", "-q", "-m", name)
    older, tip = git(other, "rev-parse", "HEAD~1"), git(other, "rev-parse", "HEAD")
    assert push_ref(other, url, REF, tip, expected=None).state == "pushed"
    assert fetch_commit(repo, url, REF, older) is False  # the ref does not name it
    assert fetch_commit(repo, url, REF, older, reaching=True) is True
    assert git(repo, "cat-file", "-t", older) == "commit"
    assert fetch_commit(repo, url, REF, "3" * 40, reaching=True) is False  # in no history there


def test_a_commit_this_clone_does_not_have_is_not_pushed_and_says_so(world, url):
    """A merge asked for on another machine, driven here before its objects were fetched: an outcome, never a
    crash; the intent is observed again once they are here."""
    repo, remote, _first, _second = world
    pushed = push_ref(repo, url, REF, "4" * 40, expected=None)
    assert pushed.state == "unreachable" and "lacks object" in pushed.detail
    assert REF not in remote_refs(str(remote))
