"""Git through dulwich: the real GitPort (more git effects arrive with later issues)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

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
from .identity import read_identity
from .includes import copy_includes
from .repository import observe_branch
from .worktrees import create_worktree, observe_worktree

if TYPE_CHECKING:
    from ...domain.integration import CheckoutObservation, TargetObservation
    from .capture import Capture, Unstable

__all__ = ["DulwichGit"]


class DulwichGit:
    """The GitPort over repositories on disk, read in-process with dulwich."""

    def identity(self, repository: Path) -> str | None:
        return read_identity(repository)

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        return observe_branch(repository, branch)

    def observe_worktree(self, repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
        return observe_worktree(repository, path, branch, base)

    def create_worktree(self, repository: Path, path: Path, branch: str, base: str) -> None:
        create_worktree(repository, path, branch, base)

    def copy_includes(self, source_root: Path, worktree: Path, patterns: Sequence[str], *,
                      skipped: list[str] | None = None) -> list[str]:
        return copy_includes(source_root, worktree, patterns, skipped=skipped)

    def observe_candidate(self, repository: Path, ref: str, parent: str, tree: str) -> CandidateRefObservation:
        from .candidates import observe_candidate
        return observe_candidate(repository, ref, parent, tree)

    def pin_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str) -> None:
        from .candidates import pin_candidate
        pin_candidate(repository, ref, parent, tree, message)

    def release_candidate(self, repository: Path, ref: str, expected_commit: str) -> None:
        from .candidates import release_candidate
        release_candidate(repository, ref, expected_commit)

    def observe_target_history(self, repository: Path, branch: str, base: str) -> TargetHistory:
        from .candidates import observe_target_history
        return observe_target_history(repository, branch, base)

    def observe_execution(self, repository: Path, path: Path, commit: str) -> ExecutionObservation:
        from .executions import observe_execution
        return observe_execution(repository, path, commit)

    def create_execution(self, repository: Path, path: Path, commit: str) -> None:
        from .executions import create_execution
        create_execution(repository, path, commit)

    def inspect_execution(self, repository: Path, path: Path, commit: str) -> ExecutionInspection:
        from .executions import inspect_execution
        return inspect_execution(repository, path, commit)

    def execution_remnants(self, repository: Path, path: Path) -> bool:
        from .executions import execution_remnants
        return execution_remnants(repository, path)

    def remove_execution(self, repository: Path, path: Path, *, group_alive: bool) -> None:
        from .executions import remove_execution
        remove_execution(repository, path, group_alive=group_alive)

    def capture_twice(self, worktree: Path, *, expected_head: str | None, base: str,
                      artifact_dir: str | None) -> Capture | Unstable:
        from .capture import capture_twice
        return capture_twice(worktree, expected_head=expected_head, base=base, artifact_dir=artifact_dir)

    def list_docket_refs(self, repository: Path) -> list[tuple[str, str]]:
        from .inventory import list_docket_refs
        return list_docket_refs(repository)

    def list_docket_worktrees(self, repository: Path) -> list[DocketWorktree]:
        from .inventory import list_docket_worktrees
        return list_docket_worktrees(repository)

    def observe_head(self, repository: Path, worktree: Path) -> tuple[str | None, str | None]:
        from .inventory import observe_head
        return observe_head(repository, worktree)

    def branch_tip(self, repository: Path, branch: str) -> str | None:
        from .inventory import branch_tip
        return branch_tip(repository, branch)

    def owns_branch(self, repository: Path, path: Path) -> str | None:
        from .inventory import owns_branch
        return owns_branch(repository, path)

    def remove_worktree(self, repository: Path, path: Path, *, expected_head: str | None, branch: str | None,
                        group_alive: bool = False) -> None:
        from .inventory import remove_worktree
        remove_worktree(repository, path, expected_head=expected_head, branch=branch, group_alive=group_alive)

    def delete_ref(self, repository: Path, ref: str, expected: str) -> None:
        from .inventory import delete_ref
        delete_ref(repository, ref, expected)

    def tree_paths(self, repository: Path, commit: str, folder: str) -> list[str]:
        from .candidates import tree_paths
        return tree_paths(repository, commit, folder)

    def observe_integration(self, repository: Path, ref: str, expected_parent: str,
                            candidate_commit: str) -> IntegrationObservation:
        from .merge import observe_integration
        return observe_integration(repository, ref, expected_parent, candidate_commit)

    def merge_candidate(self, repository: Path, head: str, candidate_commit: str, message: str) -> MergeResult:
        from .merge import merge_candidate
        return merge_candidate(repository, head, candidate_commit, message)

    def advance_ref(self, repository: Path, ref: str, expected_old: str | None, new: str) -> None:
        from .merge import advance_ref
        advance_ref(repository, ref, expected_old, new)

    def observe_target(self, repository: Path, branch: str) -> TargetObservation:
        from .merge import observe_target
        return observe_target(repository, branch)

    def commit_tree(self, repository: Path, commit: str) -> str:
        from .candidates import commit_tree
        return commit_tree(repository, commit)

    def changed_paths(self, repository: Path, base: str, commit: str) -> tuple[str, ...]:
        from .merge import changed_paths
        return changed_paths(repository, base, commit)

    def observe_checkout(self, worktree: Path, old: str, new: str) -> CheckoutObservation:
        from .checkout import observe_checkout
        return observe_checkout(worktree, old, new)

    def update_checkout(self, worktree: Path, old: str, new: str) -> None:
        from .checkout import update_checkout
        update_checkout(worktree, old, new)
