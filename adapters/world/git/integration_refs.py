"""The MergePort over dulwich: the integration ref and the target branch observed and moved by compare-and-swap,
candidates merged in the object store (merge.py), the target's checkout updated (checkout.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ....domain.effects import MAX_FOREIGN_COMMITS, ForeignCommits, IntegrationObservation, MergeResult
from ....domain.kernel.errors import BadInput
from ....domain.merge_queue.line_overlap import SideHunks
from ....domain.merge_queue.target_move import CheckoutObservation, TargetObservation
from .checkout import observe_checkout, update_checkout
from .merge import MERGE_IDENTITY, merge_candidate
from .repository import DulwichRepository, is_ancestor, is_commit, open_repo
from ....domain.kernel.codes import Code
from .ids import object_id, ref_name
from .object_graphs import missing_objects, wait_out_gc

__all__ = ["DulwichMerges", "advance_ref", "foreign_commits", "observe_integration", "observe_target"]

FOREIGN_WALK_LIMIT = 100_000  # commits walked at most to count those a moved target brought


class DulwichMerges(DulwichRepository):
    """The MergePort: the integration ref and the target observed and moved, candidates merged, the target's
    checkout updated (checkout.py)."""

    def observe_integration(self, repository: Path, ref: str, expected_parent: str,
                            candidate_commit: str) -> IntegrationObservation:
        return observe_integration(repository, ref, expected_parent, candidate_commit)

    def merge_candidate(self, repository: Path, head: str, candidate_commit: str, message: str, *,
                        write: bool = True) -> MergeResult:
        return merge_candidate(repository, head, candidate_commit, message, write=write)

    def advance_ref(self, repository: Path, ref: str, expected_old: str | None, new: str, *,
                    remerge: tuple[str, str, str] | None = None) -> None:
        advance_ref(repository, ref, expected_old, new, remerge=remerge)

    def missing_objects(self, repository: Path, tips, complete) -> list[str]:  # noqa: ANN001
        return missing_in(repository, tips, complete)

    def observe_target(self, repository: Path, branch: str) -> TargetObservation:
        return observe_target(repository, branch)

    def observe_checkout(self, worktree: Path, old: str, new: str) -> CheckoutObservation:
        return observe_checkout(worktree, old, new)

    def update_checkout(self, worktree: Path, old: str, new: str) -> None:
        update_checkout(worktree, old, new)

    def foreign_commits(self, repository: Path, expected: str, found: str) -> ForeignCommits:
        return foreign_commits(repository, expected, found)

    def changed_lines(self, repository: Path, first: str, second: str,
                      paths: Sequence[str]) -> dict[str, tuple[SideHunks, SideHunks]]:
        from .line_changes import changed_lines

        return changed_lines(repository, first, second, paths)


def observe_integration(repository: Path, ref: str, expected_parent: str,
                        candidate_commit: str) -> IntegrationObservation:
    """missing, at-parent (ref names expected_parent), merged (ref names a commit holding both expected_parent and
    candidate_commit in its history), diverged (anything else) or unreadable. Never raises."""
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return IntegrationObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            return _observe(repo, ref, expected_parent, candidate_commit)
        except (OSError, ValueError, KeyError, AssertionError) as e:
            return IntegrationObservation("unreadable", detail=f"cannot read {ref} in {repository}: {e}")


def _observe(repo, ref: str, parent: str, candidate: str) -> IntegrationObservation:  # noqa: ANN001
    from dulwich.objects import Commit

    try:
        sha = repo.refs[ref.encode()]
    except KeyError:
        return IntegrationObservation("missing")
    named = sha.decode("ascii")
    if named == parent:
        return IntegrationObservation("at-parent", commit=named)
    try:
        obj = repo[sha]
    except KeyError:
        return IntegrationObservation("unreadable", commit=named, detail=f"{ref} names missing object {named}")
    if not isinstance(obj, Commit):
        return IntegrationObservation("diverged", commit=named,
                                      detail=f"{ref} names a {obj.type_name.decode()}, not a commit")
    for name, ancestor in (("expected parent", parent), ("candidate", candidate)):
        if not is_commit(repo, ancestor) or not is_ancestor(repo, ancestor, named):
            return IntegrationObservation("diverged", commit=named,
                                          detail=f"{ref} names commit {named}, which does not hold the {name} "
                                                 f"{ancestor}")
    return IntegrationObservation("merged", commit=named)


def advance_ref(repository: Path, ref: str, expected_old: str | None, new: str, *,
                remerge: tuple[str, str, str] | None = None) -> None:
    """Move ref to new only while it names expected_old (compare-and-swap); expected_old None: create it only if
    it is absent. Nothing happens unless new is a commit in the repository, when the ref names anything else, or
    while another writer's lock holds it (a killed docket's stale lock under refs/docket/ is removed first):
    observe again to learn the outcome. BadInput ``bad-ref`` for a malformed ref name; OSError only otherwise.

    remerge (the commit new was merged onto, the candidate, the message): a prune (``git gc --prune=now``) may take
    new's objects before the ref names them, or, having looked before it moved, just after; they are computed again
    (merge.py: the same bytes) before the move, and once more after it where still missing."""
    from dulwich.errors import NotGitRepository
    from dulwich.refs import check_ref_format

    if not ref.startswith("refs/") or not check_ref_format(ref_name(ref.encode("utf-8", "surrogateescape"))):
        raise BadInput(Code.BAD_REF, f"{ref!r} is not a well-formed ref name under refs/")
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return
    with repo:
        if remerge is not None:
            _merge_again(repository, new, remerge)
        if not is_commit(repo, new):
            return
        from .ref_locks import write_ref

        message = b"docket: integrate"
        if expected_old is None:
            moved = write_ref(repo, ref, lambda: repo.refs.add_if_new(ref_name(ref), object_id(new),
                                                                      committer=MERGE_IDENTITY, message=message))
        else:
            moved = write_ref(repo, ref, lambda: repo.refs.set_if_equals(ref_name(ref), object_id(expected_old),
                                                                         object_id(new), committer=MERGE_IDENTITY,
                                                                         message=message))
    if moved and remerge is not None:
        _merge_again(repository, new, remerge, after_move=True)


def _merge_again(repository: Path, new: str, remerge: tuple[str, str, str], *, after_move: bool = False) -> None:
    """Compute new's merge again where the repository lacks any object it reaches beyond its parents."""
    onto, candidate, message = remerge
    if missing_in(repository, [new], [onto, candidate], wait=after_move):
        merge_candidate(repository, onto, candidate, message)


def observe_target(repository: Path, branch: str) -> TargetObservation:
    """Which commit refs/heads/<branch> names (found, missing, unreadable) and which worktree has it checked out: the
    main worktree (HEAD of a repository that is not bare) or a linked one (<common>/worktrees/*/HEAD). Never raises."""
    from dulwich.errors import NotGitRepository

    ref = f"refs/heads/{branch}"
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return TargetObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            try:
                sha = repo.refs[ref_name(ref)]
            except KeyError:
                return TargetObservation("missing", checked_out=_checked_out(Path(repository), ref))
            if not is_commit(repo, sha.decode("ascii")):
                return TargetObservation("unreadable", commit=sha.decode("ascii"), detail=f"{ref} names no commit")
            return TargetObservation("found", commit=sha.decode("ascii"),
                                     checked_out=_checked_out(Path(repository), ref))
        except (OSError, ValueError, KeyError, UnicodeError) as e:
            return TargetObservation("unreadable", detail=f"cannot read {ref} in {repository}: {e}")


def _checked_out(common: Path, ref: str) -> str | None:
    """The worktree whose HEAD is the symbolic ref ref: the main one (unless the repository is bare), else a linked
    one; None when none is."""
    from dulwich.config import ConfigFile

    wanted = f"ref: {ref}"
    try:
        bare = ConfigFile.from_path(str(common / "config")).get_boolean((b"core",), b"bare", False)
    except (OSError, ValueError, KeyError):
        bare = False
    if not bare and _head(common / "HEAD") == wanted:
        return str(common.parent if common.name == ".git" else common)
    linked = common / "worktrees"
    for admin in sorted(linked.iterdir()) if linked.is_dir() else ():
        if _head(admin / "HEAD") == wanted:
            gitdir = _head(admin / "gitdir")
            return str(Path(gitdir).parent) if gitdir else str(admin)
    return None


def _head(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None



def foreign_commits(repository: Path, expected: str, found: str, *,
                    limit: int = FOREIGN_WALK_LIMIT) -> ForeignCommits:
    """The commits found holds and expected does not (``git rev-list found ^expected``), newest first by commit
    time: what a target moved by someone else brought. Never raises: what cannot be walked is incomplete (detail)."""
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return ForeignCommits((), 0, False, False, detail=f"cannot open repository {repository}: {e}")
    with repo:
        commits: list[str] = []
        count = 0
        try:
            keeps = is_commit(repo, expected) and is_ancestor(repo, expected, found)
            exclude = [object_id(expected)] if is_commit(repo, expected) else []
            for entry in repo.get_walker(include=[object_id(found)], exclude=exclude):
                count += 1
                if len(commits) < MAX_FOREIGN_COMMITS:
                    commits.append(entry.commit.id.decode("ascii"))
                if count >= limit:
                    return ForeignCommits(tuple(commits), count, False, keeps,
                                          detail=f"docket walks at most {limit} commits")
        except (KeyError, OSError, ValueError) as e:
            return ForeignCommits(tuple(commits), count, False, False, detail=f"cannot walk {found}: {e}")
        detail = "" if exclude else f"{expected} is not a commit in the repository any more"
        return ForeignCommits(tuple(commits), count, not detail, keeps, detail=detail)


def missing_in(repository: Path, tips, complete, *, wait: bool = True) -> list[str]:  # noqa: ANN001
    """The objects tips reach that the repository lacks (object_graphs.missing_objects); all tips when it cannot be
    opened. Never raises."""
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return sorted(tips)
    with repo:
        if wait:  # a gc that looked before a ref moved may still delete what it names: it is waited out first
            wait_out_gc(Path(repo.controldir()))
        try:
            return missing_objects(repo.object_store, tips, complete=complete)
        except (OSError, ValueError):
            return sorted(tips)
