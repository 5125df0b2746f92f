"""The world as the application sees it: one small Protocol per kind of effect, and the ledger's reader.

Git is seen through five ports, one per concept (capture, candidate refs,
workspaces, merges, inventory), each a RepositoryPort. Each port has a real
adapter and an in-memory fake (``tests/fakes/``) that keeps the same promises
(the contract tests hold both to them), so the application's rules are tested
without disk. The real effect adapters are chosen here, and only here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ....domain.kernel.chain import ChainBreak, ChainHead, ChainRow
from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE
from ....domain.effects import (
    BranchObservation,
    CandidateRefObservation,
    DocketWorktree,
    ExecutionInspection,
    ExecutionObservation,
    ForeignCommits,
    IntegrationObservation,
    MergeResult,
    RemoteRefObservation,
    TargetHistory,
    WorktreeObservation,
)

from .process_ports import GatedHandle, ProcessPort

if TYPE_CHECKING:  # annotations only: compiling the secret patterns and importing the adapter cost start-up time
    from ....domain.merge_queue.line_overlap import SideHunks
    from ....domain.merge_queue.target_move import CheckoutObservation, TargetObservation
    from ...world.git.capture import Capture, Unstable
    from ...world.git.remote import PushOutcome
    from ....domain.events import Event
    from .launcher import Launcher

__all__ = ["CandidateRefsPort", "CapturePort", "EffectorPort", "GatedHandle", "IntentResult", "InventoryPort",
           "LedgerReader", "MergePort", "PortSet", "Ports", "ProcessPort", "RealPorts", "RemotePort", "RepositoryPort",
           "Row", "WorkspacePort", "real_ports"]

Row = tuple[int, str, int, str, bytes]  # an event as read: position, stream, version, type, stored state (JSON)


class RepositoryPort(Protocol):
    """A git repository, named by its git common dir: every git port can tell whose it is."""

    def identity(self, repository: Path) -> str | None:
        """The repository's docket identity, or None if it has none."""
        ...


class CapturePort(RepositoryPort, Protocol):
    """Content as git stores it: a worktree captured into a tree, and what commits' trees hold."""

    def capture_twice(self, worktree: Path, *, expected_head: str | None, base: str,
                      artifact_dir: str | None, repository: Path | None = None,
                      max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Capture | Unstable:
        """The worktree's HEAD plus everything uncommitted, captured twice into a tree (written to the object store):
        the Capture when both agree, else Unstable; with repository, what the capture needs is brought into that
        repository's own object store (a workspace's commits and new files live only in the workspace's). Raises Conflict ``head-moved``, Refused ``worktree-unreadable``,
        NotFound ``base-missing``, BadInput ``bad-artifact-dir`` (adapters/world/git/capture.py); Refused
        ``file-too-large`` for a file over max_file_size that the base does not hold at its path."""
        ...

    def commit_tree(self, repository: Path, commit: str) -> str:
        """The id of the commit's tree. KeyError when the commit cannot be read."""
        ...

    def tree_paths(self, repository: Path, commit: str, folder: str) -> list[str]:
        """The files the commit's tree holds under folder, relative to it, sorted ([] when none or unreadable)."""
        ...

    def changed_paths(self, repository: Path, base: str, commit: str) -> tuple[str, ...]:
        """The paths whose entries differ between base's tree and commit's, quoted as candidates quote them, sorted.
        OSError or KeyError when either cannot be read."""
        ...


class CandidateRefsPort(RepositoryPort, Protocol):
    """Candidate refs: a candidate commit pinned, observed and released; the target's history that may hold it."""

    def observe_candidate(self, repository: Path, ref: str, parent: str, tree: str) -> CandidateRefObservation:
        """missing, matching (ref names a commit whose only parent is parent and tree is tree), diverged or
        unreadable. Never raises."""
        ...

    def pin_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str, *,
                      worktree: Path | None = None, base: str | None = None) -> None:
        """From missing only: the commit of tree on parent (its id depends on parent, tree and message alone),
        stored at ref create-only; never overwrites. Other states are left alone; observe again. OSError only.
        What a prune deleted of parent's history (down to base) and tree is written again from the workspace at
        worktree first, and what the ref reaches once more after it moved."""
        ...

    def complete_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str, *,
                           worktree: Path | None, base: str | None) -> list[str]:
        """Every object ref reaches (its commit of tree on parent, down to base) in the repository, what is missing
        written again from the workspace at worktree; the ids still missing (empty: whole, or ref absent or another
        commit's). OSError only."""
        ...

    def release_candidate(self, repository: Path, ref: str, expected_commit: str) -> None:
        """Delete ref only while it names expected_commit; absent counts as released. OSError only."""
        ...

    def observe_target_history(self, repository: Path, branch: str, base: str) -> TargetHistory:
        """The commits reachable from refs/heads/<branch> back to base (each with its tree and parents), newest
        first, bounded (then incomplete). Never raises."""
        ...


class WorkspacePort(RepositoryPort, Protocol):
    """Where work happens: a task's linked worktree on its branch, and a check's execution detached at a candidate."""

    def observe_worktree(self, repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
        """absent, branch-only, present (head: the branch's commit now), diverged (detail) or unreadable. Never raises."""
        ...

    def create_worktree(self, repository: Path, path: Path, branch: str, base: str) -> None:
        """From absent or branch-only only: refs/heads/<branch> create-only at base, then the linked worktree at path.

        Any other state is left alone; observe again to learn the outcome. Raises only
        OSError for I/O failures that are no state of the world (disk full, permissions).
        """
        ...

    def copy_includes(self, source_root: Path, worktree: Path, patterns: Sequence[str], *,
                      skipped: list[str] | None = None) -> list[str]:
        """Copy the files the patterns match from the main checkout into worktree, create-only, symlinks never
        followed; the relative paths copied or already there, sorted. BadInput ``bad-include`` for a bad pattern;
        each path left alone is appended to skipped as "path: why"."""
        ...

    def observe_execution(self, repository: Path, path: Path, commit: str) -> ExecutionObservation:
        """absent, ready (registered, detached at commit, clean: may be reused), diverged or unreadable. Never raises."""
        ...

    def create_execution(self, repository: Path, path: Path, commit: str) -> None:
        """From absent only: a linked worktree at path detached at commit. Other states are left alone. OSError for
        I/O failures; Refused ``execution-unsafe-tree`` when the commit's tree names a path unsafe to write."""
        ...

    def inspect_execution(self, repository: Path, path: Path, commit: str) -> ExecutionInspection:
        """After a check: matching, mutated (HEAD, the index or a tracked file changed; path a symlink or not a
        folder) or missing. Untracked files, the check's own output, never count. Never raises."""
        ...

    def execution_remnants(self, repository: Path, path: Path) -> bool:
        """Whether a removal killed half-way left an admin entry naming path or its folder set aside. Never raises."""
        ...

    def remove_execution(self, repository: Path, path: Path, *, group_alive: bool) -> None:
        """Remove the execution and its admin entry (absent: already removed). Refused ``execution-busy`` while
        group_alive (pass True when the check's group liveness is unknown). OSError only otherwise."""
        ...


class MergePort(RepositoryPort, Protocol):
    """Integration: candidates merged on the integration ref, then the target branch and its checkout moved."""

    def observe_integration(self, repository: Path, ref: str, expected_parent: str,
                            candidate_commit: str) -> IntegrationObservation:
        """missing, at-parent, merged (ref holds expected_parent and candidate_commit in its history), diverged or
        unreadable. Never raises."""
        ...

    def merge_candidate(self, repository: Path, head: str, candidate_commit: str, message: str, *,
                        write: bool = True) -> MergeResult:
        """candidate_commit merged into head in the object store, no ref moved: merged (a deterministic two-parent
        merge commit; with write False, computed and not written: only whether it merges), already-merged,
        conflicted (paths; nothing written), unmergeable or unreadable. OSError only."""
        ...

    def missing_objects(self, repository: Path, tips: Sequence[str], complete: Sequence[str]) -> list[str]:
        """The ids of the objects tips reach (commits through their parents, trees down to blobs; commits in complete
        taken as whole) that the repository lacks, sorted: empty when the graph is whole. Never raises (an
        unreadable repository lacks tips)."""
        ...

    def advance_ref(self, repository: Path, ref: str, expected_old: str | None, new: str, *,
                    remerge: tuple[str, str, str] | None = None) -> None:
        """Compare-and-swap ref from expected_old (None: create-only) to the commit new; any other state is left
        alone (observe again). With remerge (merged onto, candidate, message): new's merge is computed again where a
        prune took its objects, before the ref moves and after. BadInput ``bad-ref`` for a malformed name; OSError
        only otherwise."""
        ...

    def observe_target(self, repository: Path, branch: str) -> TargetObservation:
        """What refs/heads/<branch> names (found, missing, unreadable) and the worktree that has it checked out, if
        any: the main worktree of a repository that is not bare, or a linked one. Never raises."""
        ...

    def observe_checkout(self, worktree: Path, old: str, new: str) -> CheckoutObservation:
        """The worktree's index and files: at-old or at-new (clean at that commit's tree, no untracked file that is
        not ignored), dirty (its first local changes) or unreadable. Never raises."""
        ...

    def update_checkout(self, worktree: Path, old: str, new: str) -> None:
        """Move the worktree's index and files from old's tree to new's, only while clean at old; nothing when a
        local change is in the way. Observe again to learn the outcome."""
        ...

    def foreign_commits(self, repository: Path, expected: str, found: str) -> ForeignCommits:
        """The commits found holds that expected does not (``git rev-list found ^expected``), newest first: what a
        target moved by someone else brought. Never raises (incomplete, with a detail, when it cannot walk)."""
        ...

    def changed_lines(self, repository: Path, first: str, second: str,
                      paths: Sequence[str]) -> dict[str, tuple[SideHunks, SideHunks]]:
        """For each path, the hunks first and second each made in it against their merge base, for
        domain/merge_queue/line_overlap.py (None for a side that cannot be compared by lines: binary, not a
        regular file, too large, or no single merge base). Never raises."""
        ...


class InventoryPort(RepositoryPort, Protocol):
    """What the repository holds: its branches, and what docket left in it (refs under refs/docket/, worktrees in
    docket's folders), removed by compare-and-swap."""

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        """What refs/heads/<branch> names: found, missing, not-a-commit or unreadable. Never raises."""
        ...

    def branch_tip(self, repository: Path, branch: str) -> str | None:
        """The commit refs/heads/<branch> names; None when missing, not a commit or unreadable. Never raises."""
        ...

    def list_docket_refs(self, repository: Path) -> list[tuple[str, str]]:
        """(ref, object id) of every ref under refs/docket/, loose or packed, sorted; broken ones left out as git
        leaves them out. Never raises (an unreadable repository lists nothing)."""
        ...

    def list_docket_worktrees(self, repository: Path, root: Path | None = None) -> list[DocketWorktree]:
        """Every worktree place in docket's folders (under root: [workspace] root, else the data folder) with
        something on disk or an admin entry naming it, sorted by path; symlinks and files where a folder should be
        are listed with a detail, never followed. Never raises."""
        ...

    def observe_head(self, repository: Path, worktree: Path) -> tuple[str | None, str | None]:
        """(head commit, branch short name) of the worktree at path from its admin entry; None for what is not
        known or detached. Never raises."""
        ...

    def owns_branch(self, repository: Path, path: Path) -> str | None:
        """The branch the worktree at path has checked out; None when detached or unknown. Never raises."""
        ...

    def remove_worktree(self, repository: Path, path: Path, *, expected_head: str | None, branch: str | None,
                        group_alive: bool = False) -> None:
        """Compare-and-swap removal of a task's or an execution's worktree in docket's folders, then of
        refs/heads/<branch> while it names expected_head. Only a folder whose HEAD is at expected_head (None: any;
        an unregistered folder only then) and on branch (when given) goes; symlinks and files are left alone.
        Refused ``worktree-busy`` while group_alive; BadInput ``bad-worktree-path`` / ``bad-branch-name``; OSError only
        otherwise. The caller proves first that nothing uncommitted is lost."""
        ...

    def delete_ref(self, repository: Path, ref: str, expected: str) -> None:
        """Delete ref only while it names expected (absent counts as deleted). BadInput ``bad-ref`` for a ref not
        under refs/docket/; OSError only otherwise."""
        ...

    def stale_locks(self, repository: Path) -> list[str]:
        """The paths of the lock files a dead writer left on loose objects and on docket's refs (older than
        adapters/world/git/stale_locks.py's threshold), sorted. Never raises."""
        ...

    def remove_stale_lock(self, repository: Path, lock: str) -> bool:
        """Remove lock if it is still one of stale_locks; whether it is gone. Never raises."""
        ...


class RemotePort(Protocol):
    """A shared git remote, named as in the repository's config, at the URL the run recorded (an effect never goes
    elsewhere: the name now standing for another URL is unreachable)."""

    def observe(self, repository: Path, remote: str, recorded_url: str, ref: str, *,
                fetch: bool = False) -> RemoteRefObservation:
        """What ref names there (found, missing, unreachable); with fetch, found only once the commit's objects
        are in the repository. Never raises."""
        ...

    def push(self, repository: Path, remote: str, recorded_url: str, ref: str, commit: str, *,
             expected: str | None) -> PushOutcome:
        """Set ref there to commit only while it names expected (None: only while absent); nothing forced. Never
        raises: the outcome says (pushed, already, moved, unreachable)."""
        ...

    def fetch(self, repository: Path, remote: str, recorded_url: str, ref: str, commit: str, *,
              reaching: bool = False) -> bool:
        """Bring the commit that ref names there (reaching: or has in its history) into the repository; whether it
        is here afterwards."""
        ...


class LedgerReader(Protocol):
    """Every read the application makes of the ledger: nothing else reads the ledger's tables.

    The SQLite file's is adapters/world/ledger/reader.py's SqliteLedgerReader; a
    PostgreSQL ledger needs one more. Positions start at 1; rows come in
    position order; a read never changes the ledger.
    """

    def chain_rows(self, *, after: int = 0, until: int | None = None) -> Iterator[ChainRow]:
        """Every event in (after, until] with the digest stored beside it (None if missing)."""
        ...

    def events(self, *, after: int = 0, until: int | None = None, topics: Sequence[str] = ()) -> Iterator[Row]:
        """The events in (after, until], only those of the given types when topics is not empty."""
        ...

    def events_at(self, positions: Iterable[int]) -> Iterator[Row]:
        """The events at the given ascending positions (those that exist)."""
        ...

    def event_at(self, position: int) -> Row | None:
        ...

    def head_position(self) -> int:
        """The last event's position; 0 when there is none."""
        ...

    def chain_head(self) -> ChainHead | None:
        """The chain's last recorded (position, digest); None when it has none."""
        ...

    def digest_at(self, position: int) -> str:
        """The digest recorded at position; "" when there is none."""
        ...

    def verify_chain(self, *, anchor: ChainHead | None = None, until: int | None = None,
                     progress: Callable[[int], None] | None = None) -> tuple[ChainHead, ChainBreak | None]:
        """The chain verified (domain.kernel.chain.verify_chain) up to until: its head and its first break, if any."""
        ...

    def chain_digests(self, *, after: int = 0, until: int | None = None) -> Iterator[bytes]:
        """The 32-byte chain digests of positions (after, until], in order (the Merkle tree's leaves)."""
        ...

    def merkle_nodes(self, height: int, count: int) -> dict[int, bytes]:
        """Kept hashes of Merkle nodes 0..count-1 of height (2**height leaves each) that still match the chain."""
        ...

    def last_event_and_chain_end(self) -> tuple[int, int]:
        """The last event's position and the chain's last position (0 if none): equal in an undamaged ledger."""
        ...

    def orphan_digest_after(self, position: int) -> int | None:
        """The first position past position holding a digest: one past the last event means its tail was cut."""
        ...

    def has_stream(self, stream: str) -> bool:
        ...

    def check_schema(self) -> None:
        """Raise VerificationFailed ('schema-mismatch') if the storage holds anything docket did not create."""
        ...


@dataclass(frozen=True)
class IntentResult:
    """What driving one pending intent came to (kernel/effector.py)."""

    intent_id: str
    intent_position: int
    outcome: str  # the outcome event's type name, or one of the effector's three words (already-resolved, ...)
    position: int | None
    event: Event | None
    unknown: bool = False
    reason: str | None = None


class PortSet(Protocol):
    """Every port an intent kind may name, as the effector and the use cases see them: RealPorts, Ports, or a
    test's own set (tests/fakes/ports.py)."""

    @property
    def capture(self) -> CapturePort: ...
    @property
    def candidate_refs(self) -> CandidateRefsPort: ...
    @property
    def workspaces(self) -> WorkspacePort: ...
    @property
    def merges(self) -> MergePort: ...
    @property
    def inventory(self) -> InventoryPort: ...
    @property
    def processes(self) -> ProcessPort: ...
    @property
    def launcher(self) -> Launcher: ...
    @property
    def remotes(self) -> RemotePort: ...


class EffectorPort(Protocol):
    """The effector as the use cases drive it (kernel/effector.py's Effector): the intents they append are driven
    to their outcomes, through the ports, on the repositories of this host."""

    @property
    def ports(self) -> PortSet: ...

    def local(self, recorded: str | Path) -> Path:
        """This host's repository for one the ledger recorded."""
        ...

    def run_pending(self, *, only: Collection[str] | None = None, after: int | None = None,
                    force: bool = False) -> list[IntentResult]:
        """Drive pending intents (only those named, if given), each on its own."""
        ...


class _NotGiven:
    """A port a Ports was not given: any use of it says which (a test gives only the ports its intents use)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> NoReturn:
        raise AttributeError(f"no {self._name} port was given to Ports (asked for its {attribute})")

    def __repr__(self) -> str:
        return f"<no {self._name} port>"


def _not_given(name: str) -> Any:  # Any: the dataclass field stands in for the port it was not given
    return field(default_factory=lambda: _NotGiven(name))


@dataclass(frozen=True)
class Ports:
    """Every port an intent kind may name; the launcher is the process port as launch intents see it. A test gives
    only the ports its intents use; using one it did not give raises AttributeError naming it."""

    capture: CapturePort = _not_given("capture")
    candidate_refs: CandidateRefsPort = _not_given("candidate_refs")
    workspaces: WorkspacePort = _not_given("workspaces")
    merges: MergePort = _not_given("merges")
    inventory: InventoryPort = _not_given("inventory")
    processes: ProcessPort = _not_given("processes")
    launcher: Launcher = _not_given("launcher")
    remotes: RemotePort = _not_given("remotes")


class RealPorts:
    """The real adapters, each made on first use: a command pays only for the ports its intents need."""

    @cached_property
    def capture(self) -> CapturePort:
        from ...world.git.capture import DulwichCapture

        return DulwichCapture()

    @cached_property
    def candidate_refs(self) -> CandidateRefsPort:
        from ...world.git.candidates import DulwichCandidateRefs

        return DulwichCandidateRefs()

    @cached_property
    def workspaces(self) -> WorkspacePort:
        from ...world.workspaces.port import DulwichWorkspaces

        return DulwichWorkspaces()

    @cached_property
    def merges(self) -> MergePort:
        from ...world.git.integration_refs import DulwichMerges

        return DulwichMerges()

    @cached_property
    def inventory(self) -> InventoryPort:
        from ...world.git.inventory import DulwichInventory

        return DulwichInventory()

    @cached_property
    def processes(self) -> ProcessPort:
        from ...world.processes.lifecycle import PsutilProcesses

        return PsutilProcesses()  # the commands that launch make their process a subreaper (process_tree.py)

    @cached_property
    def launcher(self) -> Launcher:
        from .launcher import Launcher

        return Launcher(self.processes)

    @cached_property
    def remotes(self) -> RemotePort:
        from ...world.git.remote import DulwichRemotes

        return DulwichRemotes()


def real_ports() -> RealPorts:
    return RealPorts()
