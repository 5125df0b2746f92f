"""pin: docket's pin (two captures and the create-only ref) against the reference's git CLI sequence.

A generated repository of 20,000 small files (2,000 in quick mode) in 100
folders, committed once, with 100 files modified and 20 untracked files added
(and 5 untracked files under the artifact directory, which neither side
captures), cached in bench/.work/pin-<files>. Each round, interleaved:

- docket: ``capture_twice`` in this process (a private stat cache, the tree
  written from HEAD's with only the changed folders rebuilt, the changed paths
  against the base), then the binding id and ``pin_candidate``: the commit of
  the tree on HEAD stored create-only at a candidate ref;
- git: the reference's sequence, twice, each time in a fresh private
  ``GIT_INDEX_FILE``: ``read-tree HEAD``, ``add -u``, ``ls-files --others
  --exclude-standard`` (artifact directory filtered out), ``add
  --pathspec-from-file``, ``write-tree``, ``diff-tree -r --name-only``; then
  ``commit-tree`` and ``update-ref`` from the all-zero old value.

Each round pins at a ref of its own (both sides), deleted after the run.

Both must write the same tree. Two figures against the same git median:
docket with its stat cache warm (a worktree captured before, as at every
capture after a worktree's first), and docket with the cache removed before
the round (the first capture of a worktree hashes every file, the second
reuses what the first cached). Goal: the warm figure no slower than git
(ratio git / docket >= 1.0). For information, one capture alone, cold and warm.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .common import WORK, Row, interleaved, log, median, spread

from docket.adapters.world.candidates import pin_candidate
from docket.adapters.world.capture import CACHE_NAME, capture, capture_twice
from docket.domain.binding import binding_id, binding_seed, worktree_identity

GOAL = 1.0
ARTIFACTS = "artifacts"
ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
       "GIT_COMMITTER_EMAIL": "bench@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
       "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(cwd: Path, *args: str, index: Path | None = None, stdin: bytes | None = None) -> bytes:
    env = {**os.environ, **ENV, **({"GIT_INDEX_FILE": str(index)} if index else {})}
    return subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin, check=True, capture_output=True).stdout


def prepare(folder: Path, files: int, modified: int, untracked: int) -> str:
    """The repository at folder (made once, then reused) with its changes applied; its base commit."""
    if not (folder / ".git" / "docket-bench-ready").exists():
        log(f"generating a {files:,}-file repository in {folder}")
        subprocess.run(["rm", "-rf", str(folder)], check=True)
        folder.mkdir(parents=True)
        git(folder, "init", "-q", "-b", "main")
        for i in range(files):
            path = folder / f"src{i % 100:02d}" / f"file{i:05d}.txt"
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"line one of file {i}\nline two\n")
        (folder / ".gitignore").write_text("*.log\n")
        git(folder, "add", "-A")
        git(folder, "commit", "-q", "-m", "generated")
        (folder / ".git" / "docket-bench-ready").write_text("")
    for i in range(0, files, files // modified):
        (folder / f"src{i % 100:02d}" / f"file{i:05d}.txt").write_text(f"line one of file {i}, modified\n")
    for i in range(untracked):
        (folder / f"src{i:02d}" / f"new{i}.txt").write_text(f"new file {i}\n")
    (folder / "debug.log").write_text("ignored\n")
    (folder / ARTIFACTS).mkdir(exist_ok=True)
    for i in range(5):
        (folder / ARTIFACTS / f"out{i}.xml").write_text("<report/>\n")
    return git(folder, "rev-parse", "HEAD").decode().strip()


def git_capture(folder: Path, base: str, index: Path) -> tuple[str, list[bytes]]:
    """The reference's capture with the git CLI in a private index: (tree, changed paths)."""
    index.unlink(missing_ok=True)
    git(folder, "read-tree", "HEAD", index=index)
    git(folder, "add", "-u", index=index)
    others = git(folder, "ls-files", "-z", "--others", "--exclude-standard", index=index).split(b"\0")
    wanted = [p for p in others if p and p != ARTIFACTS.encode() and not p.startswith(ARTIFACTS.encode() + b"/")]
    if wanted:
        git(folder, "add", "--pathspec-from-file=-", "--pathspec-file-nul", index=index, stdin=b"\0".join(wanted))
    tree = git(folder, "write-tree", index=index).decode().strip()
    changed = git(folder, "diff-tree", "-r", "--name-only", "-z", base, tree).split(b"\0")
    return tree, [p for p in changed if p]


@dataclass
class Measured:
    git_s: list[float]
    warm_s: list[float]
    cold_s: list[float]
    once_cold_s: list[float]
    once_warm_s: list[float]
    tree: str
    changed: int


def measure(folder: Path, base: str, rounds: int) -> Measured:
    index = folder.parent / f"{folder.name}.private-index"
    cache = folder / ".git" / CACHE_NAME

    rounds_done = {"git": 0, "docket": 0}

    def ref(side: str) -> str:
        rounds_done[side] += 1
        return f"refs/docket/candidates/bench-{side}/{rounds_done[side]:064x}"

    def twice_git() -> str:
        first, _ = git_capture(folder, base, index)
        second, _ = git_capture(folder, base, index)
        assert first == second
        commit = git(folder, "commit-tree", first, "-p", base, "-m", "docket candidate").decode().strip()
        git(folder, "update-ref", ref("git"), commit, "0" * 40)
        return first

    def twice_docket():  # noqa: ANN202
        got = capture_twice(folder, expected_head=base, base=base, artifact_dir=ARTIFACTS)
        identity = worktree_identity(os.path.realpath(folder), got.git_dir)
        binding_id(binding_seed("bench", "task"), got.head, got.tree, got.changed, identity)
        pin_candidate(folder / ".git", ref("docket"), got.head, got.tree, "docket candidate")
        return got

    def cold() -> None:
        cache.unlink(missing_ok=True)
        twice_docket()

    def once_cold() -> None:
        cache.unlink(missing_ok=True)
        capture(folder, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    def once_warm() -> None:
        capture(folder, expected_head=base, base=base, artifact_dir=ARTIFACTS)

    tree = twice_git()
    got = twice_docket()  # also warms the cache
    assert got.tree == tree, f"docket wrote {got.tree}, git {tree}"
    times = interleaved({"git": twice_git, "warm": twice_docket, "cold": cold, "once cold": once_cold,
                         "once warm": once_warm}, rounds)
    twice_docket()  # leave the cache warm
    for side in ("git", "docket"):
        refs = git(folder, "for-each-ref", "--format=%(refname)", f"refs/docket/candidates/bench-{side}/")
        git(folder, "update-ref", "--stdin", stdin=b"".join(b"delete " + r + b"\n" for r in refs.split()))
    return Measured(times["git"], times["warm"], times["cold"], times["once cold"], times["once warm"], tree,
                    len(got.changed))


def run(quick: bool) -> list[Row]:
    files, rounds = (2_000, 5) if quick else (20_000, 9)
    folder = WORK / f"pin-{files}"
    base = prepare(folder, files, modified=100, untracked=20)
    m = measure(folder, base, rounds)
    git_s, warm, cold = median(m.git_s), median(m.warm_s), median(m.cold_s)
    log(f"pin: git twice {git_s * 1000:.0f} ms, docket twice warm {warm * 1000:.0f} ms, cold {cold * 1000:.0f} ms "
        f"({m.changed} changed paths)")
    what = f"{files:,} files, 100 modified, 20 untracked, median of {rounds}"
    return [
        Row("pin", f"git CLI capture sequence twice, private index, commit-tree, update-ref; {what} "
                   f"({spread(m.git_s)})", git_s, "s"),
        Row("pin", f"docket pin: capture_twice (stat cache warm), binding id, create-only ref ({spread(m.warm_s)})",
            warm, "s",
            ratio=git_s / warm, goal=f">= {GOAL}x git (no slower)", passed=git_s / warm >= GOAL),
        Row("pin", f"(information) docket pin, stat cache removed first ({spread(m.cold_s)})", cold, "s",
            ratio=git_s / cold),
        Row("pin", f"(information) one capture, cold cache ({spread(m.once_cold_s)})", median(m.once_cold_s), "s"),
        Row("pin", f"(information) one capture, warm cache ({spread(m.once_warm_s)})", median(m.once_warm_s), "s"),
    ]
