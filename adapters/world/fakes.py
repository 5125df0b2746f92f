"""In-memory fakes of the ports, keeping the real adapters' promises (the contract tests hold both to them)."""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import signal
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...domain.canonical import canonical_json
from ...domain.chain import GENESIS_DIGEST, ChainHead, ChainRow, chain_entry, next_digest
from ...domain.effects import (
    BranchObservation,
    CandidateRefObservation,
    DocketWorktree,
    ExecutionInspection,
    ExecutionObservation,
    IntegrationObservation,
    MergeResult,
    TargetHistory,
    WorktreeObservation,
)
from ...domain.errors import BadInput, Conflict, Refused
from ...domain.integration import CheckoutObservation, TargetObservation
from ...domain.names import check_include_pattern
from ...domain.processes import Liveness, ProcessIdentity, liveness_of
from .capture import Capture, Unstable
from .inventory import DOCKET_REFS, check_docket_ref, check_removal, worktree_kind
from .processes import LaunchSpec, LogPathTaken

__all__ = ["FakeGatedProcess", "FakeGit", "FakeLedgerReader", "FakePopen", "FakeProcesses", "FakeRepository"]


@dataclass
class FakeRepository:
    """A repository as plain dicts: branch -> object id, object id -> object type."""

    identity: str | None = None
    branches: dict[str, str] = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)
    readable: bool = True  # False: its refs and objects cannot be read (its identity still can)
    worktrees: dict[Path, str | None] = field(default_factory=dict)  # linked worktree -> its branch (None: detached)
    stale: dict[Path, str | None] = field(default_factory=dict)  # admin entries whose path holds nothing -> branch
    main_branch: str | None = None  # the branch the main checkout has out
    refs: dict[str, str] = field(default_factory=dict)  # full ref names other than branches -> object id
    commits: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)  # commit -> (parents, tree)
    detached: dict[Path, str] = field(default_factory=dict)  # detached linked worktree -> its HEAD commit
    changed: dict[Path, set[str]] = field(default_factory=dict)  # worktree -> relative paths changed or added in it
    output: dict[Path, set[str]] = field(default_factory=dict)  # execution -> untracked files its check wrote

    def point(self, branch: str, kind: str = "commit") -> str:
        """Point branch at a new object of that type; returns the object's id."""
        oid = hashlib.sha1(f"{kind} {len(self.objects)} {branch}".encode()).hexdigest()
        self.objects[oid] = kind
        self.branches[branch] = oid
        return oid

    def add_tree(self, label: str) -> str:
        """A new tree object; returns its id."""
        oid = hashlib.sha1(f"tree {len(self.objects)} {label}".encode()).hexdigest()
        self.objects[oid] = "tree"
        return oid

    def add_commit(self, parents: tuple[str, ...], tree: str, message: str) -> str:
        """The commit of tree on parents (its id depends on them alone, as a pin's does); returns its id."""
        oid = hashlib.sha1(f"commit {parents} {tree} {message}".encode()).hexdigest()
        self.objects[oid] = "commit"
        self.commits[oid] = (parents, tree)
        return oid


class FakeGit:
    """The GitPort over FakeRepository values, keyed by git common dir."""

    def __init__(self, repositories: Mapping[str | Path, FakeRepository] | None = None):
        self.repositories = {Path(path): repo for path, repo in (repositories or {}).items()}
        self.observed: list[tuple[Path, str]] = []
        self.occupied: dict[Path, str] = {}  # what else is at a path: "a file", "a directory", "a symlink", ...
        self.files: dict[Path, bytes] = {}  # regular files, for copy_includes
        self.tracked: dict[tuple[str, str], list[str]] = {}  # (commit, folder) -> files its tree holds there
        self.captures: dict[Path, Capture | Unstable] = {}  # worktree -> what capture_twice returns
        self.merge_conflicts: dict[tuple[str, str], tuple[str, ...]] = {}  # (head, candidate) -> conflicting paths
        # a checkout's index and files: the commit they are clean at (absent: at whatever its branch names), or its
        # local changes
        self.checkouts: dict[Path, str | tuple[str, ...]] = {}

    def identity(self, repository: Path) -> str | None:
        repo = self.repositories.get(Path(repository))
        return repo.identity if repo is not None else None

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        self.observed.append((Path(repository), branch))
        repo = self.repositories.get(Path(repository))
        if repo is None:
            return BranchObservation("unreadable", detail=f"cannot open repository {repository}: no repository there")
        if not repo.readable:
            return BranchObservation("unreadable", detail=f"cannot read {repository}: unreadable")
        ref = f"refs/heads/{branch}"
        oid = repo.branches.get(branch)
        if oid is None:
            return BranchObservation("missing")
        kind = repo.objects.get(oid)
        if kind is None:
            return BranchObservation("unreadable", detail=f"{ref} names missing object {oid}")
        if kind != "commit":
            return BranchObservation("not-a-commit", detail=f"{ref} names a {kind}")
        return BranchObservation("found", commit=oid)

    def observe_worktree(self, repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return WorktreeObservation("unreadable", detail=f"cannot open repository {repository}")
        path = Path(path)
        tip = repo.branches.get(branch)
        holders = [str(p) for p, b in repo.worktrees.items() if b == branch and p != path]
        if repo.main_branch == branch:
            holders.append("the main checkout")

        def diverged(detail: str) -> WorktreeObservation:
            return WorktreeObservation("diverged", detail=detail)

        if path in self.occupied:
            return diverged(f"{path} is {self.occupied[path]}")
        if path not in repo.worktrees:
            if path in repo.stale and (tip != base or holders or repo.stale[path] != branch):
                return diverged(f"stale worktree entry names {path}, which does not exist")
            if tip is None:
                return WorktreeObservation("absent") if repo.objects.get(base) == "commit" else diverged(
                    f"base {base} is not a commit in {repository}")
            if tip != base:
                return diverged(f"branch {branch} is at {tip}, not at the base {base}, and {path} has no worktree")
            if holders:
                return diverged(f"branch {branch} is checked out at {holders[0]}")
            return WorktreeObservation("branch-only")
        on = repo.worktrees[path]
        if on != branch:
            return diverged(f"the worktree at {path} is on {f'branch {on}' if on else 'a detached HEAD'}, "
                            f"not on branch {branch}")
        if tip is None:
            return diverged(f"branch {branch} is missing but its worktree exists at {path}")
        if holders:
            return diverged(f"branch {branch} is also checked out at {holders[0]}")
        return WorktreeObservation("present", head=tip)

    def create_worktree(self, repository: Path, path: Path, branch: str, base: str) -> None:
        if self.observe_worktree(repository, path, branch, base).state not in ("absent", "branch-only"):
            return
        repo = self.repositories[Path(repository)]
        repo.branches.setdefault(branch, base)
        repo.stale.pop(Path(path), None)
        repo.worktrees[Path(path)] = branch

    def copy_includes(self, source_root: Path, worktree: Path, patterns: Sequence[str], *,
                      skipped: list[str] | None = None) -> list[str]:
        checked = [check_include_pattern(p) for p in patterns]
        source_root, worktree = Path(source_root), Path(worktree)
        done = []
        for source, data in sorted(self.files.items()):
            if not source.is_relative_to(source_root):
                continue
            rel = source.relative_to(source_root).as_posix()
            if not any(_matches(rel, pattern) for pattern in checked):
                continue
            existing = self.files.setdefault(worktree / rel, data)
            if existing == data:
                done.append(rel)
            elif skipped is not None:
                skipped.append(f"{rel}: a different file is already in the worktree (left alone)")
        return sorted(done)

    def observe_candidate(self, repository: Path, ref: str, parent: str, tree: str) -> CandidateRefObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return CandidateRefObservation("unreadable", detail=f"cannot open repository {repository}")
        oid = repo.refs.get(ref)
        if oid is None:
            return CandidateRefObservation("missing")
        kind = repo.objects.get(oid)
        if kind is None:
            return CandidateRefObservation("unreadable", commit=oid, detail=f"{ref} names missing object {oid}")
        if kind != "commit":
            return CandidateRefObservation("diverged", commit=oid, detail=f"{ref} names a {kind}, not a commit")
        parents, named_tree = repo.commits.get(oid, ((), ""))
        if parents != (parent,):
            return CandidateRefObservation("diverged", commit=oid,
                                           detail=f"{ref} names commit {oid} with parents {list(parents)}, not [{parent}]")
        if named_tree != tree:
            return CandidateRefObservation("diverged", commit=oid,
                                           detail=f"{ref} names commit {oid} of tree {named_tree}, not {tree}")
        return CandidateRefObservation("matching", commit=oid)

    def pin_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str) -> None:
        if self.observe_candidate(repository, ref, parent, tree).state != "missing":
            return
        repo = self.repositories[Path(repository)]
        if repo.objects.get(parent) != "commit" or repo.objects.get(tree) != "tree":
            return
        repo.refs.setdefault(ref, repo.add_commit((parent,), tree, message))

    def release_candidate(self, repository: Path, ref: str, expected_commit: str) -> None:
        repo = self.repositories.get(Path(repository))
        if repo is not None and repo.readable and repo.refs.get(ref) == expected_commit:
            del repo.refs[ref]

    def observe_target_history(self, repository: Path, branch: str, base: str) -> TargetHistory:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return TargetHistory(branch, None, {}, False, detail=f"cannot open repository {repository}")
        tip = repo.branches.get(branch)
        if tip is None:
            return TargetHistory(branch, None, {}, True)
        commits: dict[str, tuple[str, tuple[str, ...]]] = {}
        todo = [tip]
        while todo:
            oid = todo.pop()
            if oid in commits or oid not in repo.commits:
                continue
            parents, tree = repo.commits[oid]
            commits[oid] = (tree, parents)
            if oid != base:
                todo.extend(parents)
        return TargetHistory(branch, tip, commits, True)

    def observe_execution(self, repository: Path, path: Path, commit: str) -> ExecutionObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return ExecutionObservation("unreadable", detail=f"cannot open repository {repository}")
        path = Path(path)
        if path in self.occupied:
            return ExecutionObservation("diverged", detail=f"{path} is {self.occupied[path]}")
        if path not in repo.worktrees:
            return ExecutionObservation("absent")
        if repo.worktrees[path] is not None or repo.detached.get(path) != commit:
            return ExecutionObservation("diverged", detail=f"the worktree at {path} is not detached at {commit}")
        unclean = sorted(repo.changed.get(path, set()) | repo.output.get(path, set()))
        if unclean:
            return ExecutionObservation("diverged", detail=f"the worktree at {path} is not clean: {unclean[0]} changed")
        return ExecutionObservation("ready")

    def create_execution(self, repository: Path, path: Path, commit: str) -> None:
        if self.observe_execution(repository, path, commit).state != "absent":
            return
        repo = self.repositories[Path(repository)]
        if repo.objects.get(commit) != "commit":
            return
        repo.worktrees[Path(path)] = None
        repo.detached[Path(path)] = commit

    def inspect_execution(self, repository: Path, path: Path, commit: str) -> ExecutionInspection:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return ExecutionInspection("mutated", detail=f"cannot open repository {repository}")
        path = Path(path)
        if path in self.occupied:
            return ExecutionInspection("mutated", detail=f"{path} is {self.occupied[path]}")
        if path not in repo.worktrees:
            return ExecutionInspection("missing", detail=f"nothing at {path}")
        if repo.worktrees[path] is not None or repo.detached.get(path) != commit:
            return ExecutionInspection("mutated", detail=f"HEAD is not detached at {commit}")
        changed = sorted(repo.changed.get(path, ()))
        if changed:
            return ExecutionInspection("mutated", detail=f"tracked {changed[0]} was changed")
        return ExecutionInspection("matching")

    def execution_remnants(self, repository: Path, path: Path) -> bool:
        return False  # the fake removes an execution in one step

    def remove_execution(self, repository: Path, path: Path, *, group_alive: bool) -> None:
        if group_alive:
            raise Refused("execution-busy", f"the check running in {path} is still alive; stop its process group first")
        repo = self.repositories[Path(repository)]
        path = Path(path)
        for held in (repo.worktrees, repo.detached, repo.changed, repo.output, self.occupied):
            held.pop(path, None)

    def capture_twice(self, worktree: Path, *, expected_head: str | None, base: str,
                      artifact_dir: str | None) -> Capture | Unstable:
        """What the test set in ``captures[worktree]``; raises as capture does when nothing is set or HEAD moved."""
        found = self.captures.get(Path(worktree))
        if found is None:
            raise Refused("worktree-unreadable", f"{worktree} is not a git worktree (no capture set in the fake)")
        head = found.head if isinstance(found, Capture) else found.first.head
        if expected_head is not None and head != expected_head:
            raise Conflict("head-moved", f"HEAD of {worktree} is {head}, not the expected {expected_head}")
        return found

    def list_docket_refs(self, repository: Path) -> list[tuple[str, str]]:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return []
        return sorted((ref, oid) for ref, oid in repo.refs.items() if ref.startswith(DOCKET_REFS))

    def list_docket_worktrees(self, repository: Path) -> list[DocketWorktree]:
        """As the real listing, over worktrees, stale entries and occupied paths at docket's worktree places; an
        admin entry's name is the path's last part."""
        common = Path(repository)
        repo = self.repositories.get(common)
        if repo is None:
            return []
        places = {p for p in (*repo.worktrees, *repo.stale, *self.occupied) if worktree_kind(common, p) is not None}
        found = []
        for path in sorted(places):
            head, branch = self.observe_head(common, path)
            registered = path in repo.worktrees or path in repo.stale
            exists = path in repo.worktrees or path in self.occupied
            detail = f"{path} is {self.occupied[path]}" if path in self.occupied else ""
            found.append(DocketWorktree(str(path), worktree_kind(common, path), exists, registered, branch, head,
                                        path.name if registered else None, detail))
        return found

    def observe_head(self, repository: Path, worktree: Path) -> tuple[str | None, str | None]:
        repo = self.repositories.get(Path(repository))
        path = Path(worktree)
        if repo is None or path in self.occupied:
            return None, None
        held = repo.worktrees if path in repo.worktrees else repo.stale
        if path not in held:
            return None, None
        branch = held[path]
        if branch is not None:
            return (repo.branches.get(branch) if repo.readable else None), branch
        return repo.detached.get(path), None

    def branch_tip(self, repository: Path, branch: str) -> str | None:
        return self.observe_branch(repository, branch).commit

    def owns_branch(self, repository: Path, path: Path) -> str | None:
        return self.observe_head(repository, path)[1]

    def remove_worktree(self, repository: Path, path: Path, *, expected_head: str | None, branch: str | None,
                        group_alive: bool = False) -> None:
        """As the real removal; an occupied path described as "a symlink..." or "a file..." is left alone, any
        other occupied path is an unregistered folder."""
        common, path = Path(repository), Path(path)
        check_removal(common, path, branch=branch, group_alive=group_alive)
        repo = self.repositories.get(common)
        if repo is None or not repo.readable:
            return
        occupied = self.occupied.get(path, "")
        if occupied.startswith(("a symlink", "a file")):
            return
        head, on = self.observe_head(common, path)
        if path in repo.worktrees or occupied:
            if path not in repo.worktrees and (expected_head is not None or branch is not None):
                return
            if expected_head is not None and head != expected_head:
                return
            if branch is not None and on != branch:
                return
        for held in (repo.worktrees, repo.stale, repo.detached, repo.changed, self.occupied):
            held.pop(path, None)
        if branch is None:
            return
        expected = expected_head if expected_head is not None else (head if on == branch else None)
        if expected is None or branch in repo.worktrees.values() or repo.main_branch == branch:
            return
        if repo.branches.get(branch) == expected:
            del repo.branches[branch]

    def delete_ref(self, repository: Path, ref: str, expected: str) -> None:
        check_docket_ref(ref)
        repo = self.repositories.get(Path(repository))
        if repo is not None and repo.readable and repo.refs.get(ref) == expected:
            del repo.refs[ref]

    def tree_paths(self, repository: Path, commit: str, folder: str) -> list[str]:
        return sorted(self.tracked.get((commit, folder.strip("/")), ()))

    def observe_integration(self, repository: Path, ref: str, expected_parent: str,
                            candidate_commit: str) -> IntegrationObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return IntegrationObservation("unreadable", detail=f"cannot open repository {repository}")
        oid = _ref_value(repo, ref)
        if oid is None:
            return IntegrationObservation("missing")
        if oid == expected_parent:
            return IntegrationObservation("at-parent", commit=oid)
        if repo.objects.get(oid) != "commit":
            return IntegrationObservation("diverged", commit=oid, detail=f"{ref} names no commit")
        held = _fake_ancestors(repo, oid)
        if expected_parent in held and candidate_commit in held:
            return IntegrationObservation("merged", commit=oid)
        return IntegrationObservation("diverged", commit=oid, detail=f"{ref} names commit {oid}, not this step's")

    def merge_candidate(self, repository: Path, head: str, candidate_commit: str, message: str) -> MergeResult:
        """Merged, unless merge_conflicts names (head, candidate): its tree is a new tree named by both commits."""
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return MergeResult("unreadable", detail=f"cannot open repository {repository}")
        for oid in (head, candidate_commit):
            if repo.objects.get(oid) != "commit":
                return MergeResult("unreadable", detail=f"{oid} is not a commit in the repository")
        if candidate_commit in _fake_ancestors(repo, head):
            return MergeResult("already-merged", commit=head, tree=repo.commits.get(head, ((), None))[1])
        conflicts = self.merge_conflicts.get((head, candidate_commit))
        if conflicts is not None:
            return MergeResult("conflicted", conflicts=tuple(sorted(conflicts)))
        tree = hashlib.sha1(f"merged tree {head} {candidate_commit}".encode()).hexdigest()
        repo.objects[tree] = "tree"
        commit = repo.add_commit((head, candidate_commit), tree, message)
        return MergeResult("merged", commit=commit, tree=tree)

    def advance_ref(self, repository: Path, ref: str, expected_old: str | None, new: str) -> None:
        if not ref.startswith("refs/") or ".." in ref or ref.endswith("/"):
            raise BadInput("bad-ref", f"{ref!r} is not a well-formed ref name under refs/")
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable or repo.objects.get(new) != "commit":
            return
        if _ref_value(repo, ref) != expected_old:
            return
        if ref.startswith("refs/heads/"):
            repo.branches[ref.removeprefix("refs/heads/")] = new
        else:
            repo.refs[ref] = new

    def observe_target(self, repository: Path, branch: str) -> TargetObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return TargetObservation("unreadable", detail=f"cannot open repository {repository}")
        holder = next((str(path) for path, held in repo.worktrees.items() if held == branch), None)
        checked_out = str(repository) if repo.main_branch == branch else holder
        oid = repo.branches.get(branch)
        if oid is None:
            return TargetObservation("missing", checked_out=checked_out)
        if repo.objects.get(oid) != "commit":
            return TargetObservation("unreadable", commit=oid, detail=f"refs/heads/{branch} names no commit")
        return TargetObservation("found", commit=oid, checked_out=checked_out)

    def commit_tree(self, repository: Path, commit: str) -> str:
        return self.repositories[Path(repository)].commits[commit][1]

    def changed_paths(self, repository: Path, base: str, commit: str) -> tuple[str, ...]:
        """Every path changed in a worktree of the repository (the fake keeps no trees' contents)."""
        repo = self.repositories[Path(repository)]
        return tuple(sorted(set().union(*repo.changed.values()))) if repo.changed else ()

    def observe_checkout(self, worktree: Path, old: str, new: str) -> CheckoutObservation:
        at = self.checkouts.get(Path(worktree), old)
        if isinstance(at, tuple):
            return CheckoutObservation("dirty", at)
        return CheckoutObservation("at-old" if at == old else "at-new" if at == new else "dirty",
                                   () if at in (old, new) else (f"staged against {at}",))

    def update_checkout(self, worktree: Path, old: str, new: str) -> None:
        if self.observe_checkout(worktree, old, new).state == "at-old":
            self.checkouts[Path(worktree)] = new


def _ref_value(repo: FakeRepository, ref: str) -> str | None:
    if ref.startswith("refs/heads/"):
        return repo.branches.get(ref.removeprefix("refs/heads/"))
    return repo.refs.get(ref)


def _fake_ancestors(repo: FakeRepository, commit: str) -> set[str]:
    """commit and every commit reachable from it through FakeRepository.commits."""
    seen, todo = set(), [commit]
    while todo:
        oid = todo.pop()
        if oid not in seen:
            seen.add(oid)
            todo.extend(repo.commits.get(oid, ((), ""))[0])
    return seen


class FakeLedgerReader:
    """The LedgerReader port over a list in memory: events appended here are chained as the store chains them."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, int, str, bytes]] = []  # position, stream, version, type, state
        self.digests: dict[int, str] = {}
        self.kept_nodes: dict[tuple[int, int], tuple[str, bytes]] = {}  # (height, node): (digest, hash)

    def keep_merkle_nodes(self, height: int, nodes: Sequence[tuple[int, str, bytes]]) -> None:
        """The Ledger's keep_merkle_nodes, for a tree over this reader."""
        self.kept_nodes.update({(height, node): (digest, hash_) for node, digest, hash_ in nodes})

    def append(self, stream: str, type_: str, payload: dict, recorded_at: str) -> int:
        """Record one event at the next position (state as docket's mapper writes it); returns its position."""
        position = len(self.rows) + 1
        version = 1 + sum(1 for row in self.rows if row[1] == stream)
        state = canonical_json({"payload": payload, "recorded_at": recorded_at})
        self.rows.append((position, stream, version, type_, state))
        previous = self.digests.get(position - 1, GENESIS_DIGEST)
        self.digests[position] = next_digest(previous, chain_entry(position, stream, version, type_, state))
        return position

    def chain_rows(self, *, after: int = 0, until: int | None = None) -> Iterator[ChainRow]:
        return (ChainRow(*row, self.digests.get(row[0])) for row in self.events(after=after, until=until))

    def events(self, *, after: int = 0, until: int | None = None,
               topics: Sequence[str] = ()) -> Iterator[tuple[int, str, int, str, bytes]]:
        end = len(self.rows) if until is None else min(until, len(self.rows))
        return (row for row in self.rows[after:end] if not topics or row[3] in topics)

    def events_at(self, positions: Iterable[int]) -> Iterator[tuple[int, str, int, str, bytes]]:
        return (row for p in positions if (row := self.event_at(p)) is not None)

    def event_at(self, position: int) -> tuple[int, str, int, str, bytes] | None:
        return self.rows[position - 1] if 1 <= position <= len(self.rows) else None

    def head_position(self) -> int:
        return len(self.rows)

    def chain_head(self) -> ChainHead | None:
        end = max(self.digests, default=0)
        return ChainHead(end, self.digests[end]) if end else None

    def digest_at(self, position: int) -> str:
        return self.digests.get(position, "")

    def chain_digests(self, *, after: int = 0, until: int | None = None) -> Iterator[bytes]:
        end = len(self.rows) if until is None else min(until, len(self.rows))
        return (bytes.fromhex(self.digests[p]) for p in range(after + 1, end + 1) if p in self.digests)

    def merkle_nodes(self, height: int, count: int) -> dict[int, bytes]:
        return {node: hash_ for (h, node), (digest, hash_) in self.kept_nodes.items()
                if h == height and node < count and self.digests.get((node + 1) << height) == digest}

    def last_event_and_chain_end(self) -> tuple[int, int]:
        return len(self.rows), max(self.digests, default=0)

    def orphan_digest_after(self, position: int) -> int | None:
        return min((p for p in self.digests if p > position), default=None)

    def has_stream(self, stream: str) -> bool:
        return any(row[1] == stream for row in self.rows)

    def check_schema(self) -> None:
        return None  # a list has no schema to tamper with


def _matches(rel: str, pattern: str) -> bool:
    """Part by part, as the real adapter matches: a pattern naming a folder takes what it holds."""
    names, parts = rel.split("/"), pattern.rstrip("/").split("/")
    return len(names) >= len(parts) and all(
        fnmatch.fnmatchcase(n, p) and (p.startswith(".") or not n.startswith(".")) for n, p in zip(names, parts))


@dataclass
class FakePopen:
    """What the launcher waits on: returncode is None while the fake process runs."""

    pid: int
    returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"fake process {self.pid}", timeout or 0.0)  # it would never end
        return self.returncode


@dataclass
class FakeGatedProcess:
    identity: ProcessIdentity
    popen: FakePopen
    owner: FakeProcesses
    state: str = "held"  # held | opened | closed

    def open(self) -> None:
        self._leave("opened")
        if self.owner.liveness(self.identity) != "alive":
            raise BrokenPipeError(f"fake process {self.identity.pid} is gone")

    def close_without_opening(self) -> None:
        self._leave("closed")
        self.owner.exit(self.identity, 125)

    def _leave(self, state: str) -> None:
        if self.state != "held":
            raise ValueError(f"the gate of process {self.identity.pid} was already {self.state}")
        self.state = state


class FakeProcesses:
    """The ProcessPort over a table of processes in memory, judged by the same pure liveness rule as real ones."""

    def __init__(self, host: str = "fake-host", boot_id: str = "fake-boot"):
        self.host, self.boot_id = host, boot_id
        self.running: dict[int, ProcessIdentity] = {}  # pid -> the process that holds it now
        self.environ: dict[ProcessIdentity, dict[str, str]] = {}
        self.forced: dict[ProcessIdentity, Liveness] = {}  # liveness set by a test, whatever the table says
        self.popens: dict[ProcessIdentity, FakePopen] = {}
        self.spawned: list[LaunchSpec] = []
        self.gates: list[FakeGatedProcess] = []
        self.terminated: list[ProcessIdentity] = []
        self.logs: set[Path] = set()
        self._next_pid = 1000
        self._ticks = 0

    # --- driving the fake ---------------------------------------------------------------------------------------

    def start(self, *, pgid: int | None = None, pid: int | None = None,
              environ: Mapping[str, str] | None = None) -> ProcessIdentity:
        """A process running now (at pid if given: whoever held it before is gone, the pid reused)."""
        if pid is None:
            self._next_pid += 1
            pid = self._next_pid
        self._ticks += 1
        identity = ProcessIdentity(self.host, self.boot_id, pid, pgid if pgid is not None else pid, str(self._ticks))
        self.running[pid] = identity
        self.environ[identity] = dict(environ or {})
        return identity

    def exit(self, identity: ProcessIdentity, returncode: int) -> None:
        """The process ends (if it still runs) with returncode (-N: killed by signal N)."""
        if self.running.get(identity.pid) == identity:
            del self.running[identity.pid]
        popen = self.popens.get(identity)
        if popen is not None and popen.returncode is None:
            popen.returncode = returncode

    def set_liveness(self, identity: ProcessIdentity, liveness: Liveness) -> None:
        self.forced[identity] = liveness

    # --- the port -----------------------------------------------------------------------------------------------

    def this_host(self) -> tuple[str, str]:
        return self.host, self.boot_id

    def identity(self, pid: int) -> ProcessIdentity | None:
        return self.running.get(pid)

    def liveness(self, identity: ProcessIdentity) -> Liveness:
        if identity in self.forced:
            return self.forced[identity]
        now = self.running.get(identity.pid)
        return liveness_of(identity, host=self.host, boot_id=self.boot_id, exists=now is not None,
                           start_time_now=now.start_time if now is not None else None)

    def group_liveness(self, identity: ProcessIdentity) -> Liveness:
        if identity in self.forced:
            return self.forced[identity]
        if identity.host != self.host:
            return "unknown"
        if identity.boot_id != self.boot_id or not self._owns_group(identity):
            return "dead"
        return "alive" if self._members(identity.pgid) else "dead"

    def spawn_gated(self, spec: LaunchSpec) -> FakeGatedProcess:
        if Path(spec.log_path) in self.logs:
            raise LogPathTaken(errno.EEXIST, f"refusing to reuse the log path {spec.log_path}", str(spec.log_path))
        self.logs.add(Path(spec.log_path))
        self.spawned.append(spec)
        identity = self.start(environ=spec.env)
        self.popens[identity] = FakePopen(identity.pid)
        gate = FakeGatedProcess(identity, self.popens[identity], self)
        self.gates.append(gate)
        return gate

    def terminate_group(self, identity: ProcessIdentity, *, grace: float = 5.0, wait: float = 10.0) -> Liveness:
        state = self.group_liveness(identity)
        if state == "alive" and self._owns_group(identity):
            self.terminated.append(identity)
            for member in self._members(identity.pgid):
                self.exit(member, -signal.SIGTERM)
                self.forced.pop(member, None)
            self.forced.pop(identity, None)
        return self.group_liveness(identity)

    def find_marked(self, name: str, value: str) -> list[tuple[ProcessIdentity, dict[str, str]]]:
        return [(identity, {k: v for k, v in self.environ[identity].items() if k.startswith("DOCKET_")})
                for identity in self.running.values()
                if self.environ[identity].get(name) == value and self.liveness(identity) == "alive"]

    def _members(self, pgid: int) -> list[ProcessIdentity]:
        return [identity for identity in self.running.values() if identity.pgid == pgid]

    def _owns_group(self, identity: ProcessIdentity) -> bool:
        """The real adapter's rule: the leader there with its start time, or gone with members left in its group."""
        now = self.running.get(identity.pid)
        if identity.pgid != identity.pid:
            return now == identity
        if now is not None:
            return now.start_time == identity.start_time
        return bool(self._members(identity.pgid))
