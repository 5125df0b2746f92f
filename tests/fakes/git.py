"""The git port's fake: repositories as plain values, keyed by git common dir."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from docket.adapters.world.capture import Capture, Unstable
from docket.adapters.world.inventory import DOCKET_REFS, check_docket_ref, check_removal, worktree_kind
from docket.domain.effects import (
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
from docket.domain.errors import BadInput, Conflict, Refused
from docket.domain.integration import CheckoutObservation, TargetObservation
from docket.domain.names import check_include_pattern

__all__ = ["FakeGit", "FakeRepository"]


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


def _matches(rel: str, pattern: str) -> bool:
    """Part by part, as the real adapter matches: a pattern naming a folder takes what it holds."""
    names, parts = rel.split("/"), pattern.rstrip("/").split("/")
    return len(names) >= len(parts) and all(
        fnmatch.fnmatchcase(n, p) and (p.startswith(".") or not n.startswith(".")) for n, p in zip(names, parts))
