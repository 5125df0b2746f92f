"""Candidate refs through dulwich: observe, pin (create-only) and release (compare-and-swap) one candidate commit."""

from __future__ import annotations

from pathlib import Path

from ....domain.effects import CandidateRefObservation, TargetHistory
from .pin_objects import complete_pin, restore_pinned
from .repository import DulwichRepository, open_repo
from .ids import ref_name
from .inventory import delete_ref
import heapq

__all__ = ["CANDIDATE_IDENTITY", "TARGET_WALK_LIMIT", "DulwichCandidateRefs", "complete_candidate", "observe_candidate",
           "observe_target_history", "pin_candidate", "release_candidate"]

CANDIDATE_IDENTITY = b"docket <docket@localhost>"
TARGET_WALK_LIMIT = 20_000  # commits of a target's history read to learn whether it holds a candidate


def observe_candidate(repository: Path, ref: str, parent: str, tree: str) -> CandidateRefObservation:
    """missing, matching (the ref names a commit whose only parent is parent and whose tree is tree), diverged
    (it names anything else; commit and detail say what) or unreadable. Never raises."""
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return CandidateRefObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            return _observe(repo, ref, parent, tree)
        except (OSError, ValueError) as e:
            return CandidateRefObservation("unreadable", detail=f"cannot read {ref} in {repository}: {e}")


def pin_candidate(repository: Path, ref: str, parent: str, tree: str, message: str, *,
                  worktree: Path | None = None, base: str | None = None) -> None:
    """From missing only: write the commit of tree on parent and store it at ref create-only; never overwrites.

    The commit's author and committer are ``docket <docket@localhost>`` at the
    parent's commit time, so its id depends only on (parent, tree, message):
    pinning twice, or again after a crash, makes the same commit. Nothing is
    written unless parent is a commit and tree a tree in the repository. Any
    other state of the world is left alone (observe again to learn the outcome);
    only OSError for real I/O failures propagates.

    A prune (``git gc --prune=now``) may delete what the capture wrote before
    the ref names it: with worktree (the workspace captured) and base (the
    task's base, taken as whole), what is missing is written again from the
    workspace before the commit is made, and once more after the ref moved
    (pin_objects.py).
    """
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return
    with repo:
        if _observe(repo, ref, parent, tree).state != "missing":
            return
        from .objects import add_object
        from .ref_locks import write_ref

        restore_pinned(repo, Path(repository), worktree, parent, tree, base)
        commit = candidate_commit(repo, parent, tree, message)
        if commit is None:
            return
        add_object(repo.object_store, commit)
        # a lock held now (another process making this ref): observing again tells what it made
        if write_ref(repo, ref, lambda: repo.refs.add_if_new(ref_name(ref), commit.id, committer=CANDIDATE_IDENTITY,
                                                             message=b"docket: pin candidate")):
            complete_pin(repo, Path(repository), ref, parent, tree, lambda: candidate_commit(repo, parent, tree, message),
                         worktree=worktree, base=base)


def complete_candidate(repository: Path, ref: str, parent: str, tree: str, message: str, *,
                       worktree: Path | None, base: str | None) -> list[str]:
    """Every object the candidate ref reaches (down to base) in the repository, written again from the workspace
    where a prune deleted it; the ids still missing (empty: whole, or the ref is absent or another commit's).
    Only OSError for real I/O failures propagates."""
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return []
    with repo:
        return complete_pin(repo, Path(repository), ref, parent, tree,
                            lambda: candidate_commit(repo, parent, tree, message), worktree=worktree, base=base)


def release_candidate(repository: Path, ref: str, expected_commit: str) -> None:
    """Delete ref only while it names expected_commit (compare-and-swap); an absent ref counts as released.

    A ref naming anything else is left alone. Only OSError for real I/O failures propagates.
    """

    delete_ref(repository, ref, expected_commit)


def observe_target_history(repository: Path, branch: str, base: str, *,
                           limit: int = TARGET_WALK_LIMIT) -> TargetHistory:
    """The commits reachable from refs/heads/<branch>, newest first by commit time, not walked past base; at most
    limit of them (the history is then incomplete). Never raises."""

    from dulwich.errors import NotGitRepository
    from dulwich.objects import Commit

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return TargetHistory(branch, None, {}, False, detail=f"cannot open repository {repository}: {e}")
    with repo:
        commits: dict[str, tuple[str, tuple[str, ...]]] = {}
        try:
            try:
                tip = repo.refs[ref_name(f"refs/heads/{branch}")]
            except KeyError:
                return TargetHistory(branch, None, {}, True)
            queue: list[tuple[int, bytes, Commit]] = []
            queued: set[bytes] = set()
            missing: list[str] = []

            def push(oid: bytes) -> None:
                queued.add(oid)
                try:
                    obj = repo[oid]
                except KeyError:
                    missing.append(oid.decode("ascii"))
                    return
                if isinstance(obj, Commit):
                    heapq.heappush(queue, (-obj.commit_time, oid, obj))

            push(tip)
            while queue and len(commits) < limit:
                _, oid, commit = heapq.heappop(queue)
                name = oid.decode("ascii")
                commits[name] = (commit.tree.decode("ascii"), tuple(p.decode("ascii") for p in commit.parents))
                if name == base:
                    continue  # older work is no run's: its candidates all stand on the base or after it
                for parent in commit.parents:
                    if parent not in queued:
                        push(parent)
            detail = (f"object {missing[0]} is missing" if missing
                      else f"docket reads at most {limit} commits of it" if queue else "")
            return TargetHistory(branch, tip.decode("ascii"), commits, not queue and not missing, detail=detail)
        except (OSError, ValueError) as e:
            return TargetHistory(branch, None, {}, False, detail=f"cannot read the history of {branch}: {e}")


def candidate_commit(repo, parent: str, tree: str, message: str):  # noqa: ANN001, ANN201
    """The commit object pinning tree on parent (not stored), or None unless both objects are in the repository."""
    from dulwich.objects import Commit, Tree

    try:
        parent_commit = repo[parent.encode("ascii")]
        tree_object = repo[tree.encode("ascii")]
    except (KeyError, ValueError, UnicodeEncodeError):
        return None
    if not isinstance(parent_commit, Commit) or not isinstance(tree_object, Tree):
        return None
    commit = Commit()
    commit.tree = tree_object.id
    commit.parents = [parent_commit.id]
    commit.author = commit.committer = CANDIDATE_IDENTITY
    commit.author_time = commit.commit_time = parent_commit.commit_time
    commit.author_timezone = commit.commit_timezone = 0
    commit.encoding = None
    commit.message = message.encode("utf-8") if message.endswith("\n") else (message + "\n").encode("utf-8")
    return commit


def _observe(repo, ref: str, parent: str, tree: str) -> CandidateRefObservation:  # noqa: ANN001
    from dulwich.objects import Commit

    try:
        sha = repo.refs[ref.encode()]
    except KeyError:
        return CandidateRefObservation("missing")
    named = sha.decode("ascii")
    try:
        obj = repo[sha]
    except KeyError:
        return CandidateRefObservation("unreadable", commit=named, detail=f"{ref} names missing object {named}")
    if not isinstance(obj, Commit):
        return CandidateRefObservation("diverged", commit=named,
                                       detail=f"{ref} names a {obj.type_name.decode()}, not a commit")
    parents = [p.decode("ascii") for p in obj.parents]
    if parents != [parent]:
        return CandidateRefObservation("diverged", commit=named,
                                       detail=f"{ref} names commit {named} with parents {parents}, not [{parent}]")
    if obj.tree.decode("ascii") != tree:
        return CandidateRefObservation("diverged", commit=named,
                                       detail=f"{ref} names commit {named} of tree {obj.tree.decode()}, not {tree}")
    return CandidateRefObservation("matching", commit=named)


class DulwichCandidateRefs(DulwichRepository):
    """The CandidateRefsPort over repositories on disk."""

    def observe_candidate(self, repository: Path, ref: str, parent: str, tree: str) -> CandidateRefObservation:
        return observe_candidate(repository, ref, parent, tree)

    def pin_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str, *,
                      worktree: Path | None = None, base: str | None = None) -> None:
        pin_candidate(repository, ref, parent, tree, message, worktree=worktree, base=base)

    def complete_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str, *,
                           worktree: Path | None, base: str | None) -> list[str]:
        return complete_candidate(repository, ref, parent, tree, message, worktree=worktree, base=base)

    def release_candidate(self, repository: Path, ref: str, expected_commit: str) -> None:
        release_candidate(repository, ref, expected_commit)

    def observe_target_history(self, repository: Path, branch: str, base: str) -> TargetHistory:
        return observe_target_history(repository, branch, base)
