"""A shared git remote through dulwich, in-process: read its refs, push one ref create-only or by compare-and-swap,
fetch what a ref names (issue 23: several machines meet at one remote).

A push names the value it expects the ref to have on the remote (absent, for create-only) and moves nothing
otherwise: the expectation is checked against the refs the remote advertises, and the remote checks it again as it
writes (a git server refuses an update whose old value is not the ref's; dulwich's local transport writes with
``set_if_equals``). So a remote that moved between the two is still not overwritten, and nothing is ever forced.
Every outcome is a value, not an exception: ``pushed``, ``already`` (the ref names that commit already: an earlier
push, or another machine's, counts), ``moved`` (it names another commit, given), ``unreachable`` (with why). What
the remote said is kept for the record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from .ids import object_id
from .repository import open_repo
from .ref_locks import write_ref
from urllib.parse import urlsplit, urlunsplit
from ....domain.effects import RemoteRefObservation

if TYPE_CHECKING:
    from ....domain.effects import RemoteRefObservation

__all__ = ["DulwichRemotes", "PushOutcome", "fetch_commit", "observe_remote_ref", "push_ref", "redacted_url",
           "remote_refs", "remote_url", "resolve_remote"]

ZERO = b"0" * 40


@dataclass(frozen=True)
class PushOutcome:
    state: str  # pushed | already | moved | unreachable
    found: str | None = None  # moved: the commit the remote's ref names (None: absent)
    detail: str = ""


def remote_url(repository: Path, remote: str) -> str:
    """The URL of the remote named in the repository's own config (``remote.<name>.url``); ValueError if none."""

    with open_repo(repository) as repo:
        try:
            url = repo.get_config().get((b"remote", remote.encode()), b"url")
        except KeyError:
            raise ValueError(f"the repository has no remote {remote!r} (git remote add {remote} URL)") from None
    return url.decode("utf-8", "surrogateescape")


def _client(url: str) -> tuple[Any, str]:
    from dulwich.client import get_transport_and_path

    return get_transport_and_path(url)


def remote_refs(url: str, prefix: str | None = None) -> dict[str, str]:
    """The refs the remote advertises (under prefix, if given): name -> commit. OSError and dulwich's errors
    propagate (an unreachable remote)."""
    client, path = _client(url)
    result = client.get_refs(path)
    refs = getattr(result, "refs", result)
    return {name.decode("utf-8", "surrogateescape"): sha.decode("ascii") for name, sha in refs.items()
            if sha is not None and (prefix is None or name.startswith(prefix.encode()))
            and not name.endswith(b"^{}")}


def push_ref(repository: Path, url: str, ref: str, commit: str, *, expected: str | None) -> PushOutcome:
    """Set ref on the remote to commit, with commit's objects, only while it has expected (None: only while it is
    absent). Never raises for the remote's answer or its absence: the outcome says."""
    from dulwich.errors import GitProtocolError, HangupException, NotGitRepository, SendPackError
    from dulwich.file import FileLocked

    name, new = ref.encode(), commit.encode("ascii")
    want_old = ZERO if expected is None else expected.encode("ascii")
    seen: dict[str, Any] = {}

    def update_refs(advertised: dict[bytes, bytes]) -> dict[bytes, bytes]:
        current = advertised.get(name, ZERO)
        seen["current"] = current
        if current == new or current != want_old:
            return {}  # nothing to send: already there, or moved
        return {name: new}

    try:
        client, path = _client(url)
        with open_repo(repository) as repo:
            result = _send_pack(client, path, ref, update_refs, repo.generate_pack_data)
    except FileLocked:  # a process of the remote's own holds the ref (dulwich's local transport says so)
        return PushOutcome("unreachable", detail=f"the remote refused the update: {ref} is locked there")
    except (OSError, GitProtocolError, HangupException, SendPackError, NotGitRepository, ValueError) as e:
        return PushOutcome("unreachable", detail=f"{type(e).__name__}: {e}"[:2000])
    except KeyError as e:  # an object of the commit is not in this clone (yet): nothing was sent
        return PushOutcome("unreachable", detail=f"{commit} cannot be pushed from this clone: it lacks object {e}")
    current = seen.get("current")
    if current == new:
        return PushOutcome("already")
    if current is not None and current != want_old:
        return PushOutcome("moved", None if current == ZERO else current.decode("ascii"))
    refused = (getattr(result, "ref_status", None) or {}).get(name)
    if refused:  # the remote's own check: it moved between its advertisement and the write
        return _after_refusal(url, ref, commit, expected, str(refused))
    return PushOutcome("pushed")


def _send_pack(client: Any, path: str, ref: str, update_refs: Any, pack_data: Any) -> Any:
    """The push. A remote on this machine's disk (a path, or file://) is written by this process itself, as a
    repository here is: its refs under refs/docket/ through ref_locks.write_ref, so that a docket killed in the
    middle of a push leaves no lock that refuses every later one (its claim names a dead writer)."""
    from dulwich.client import LocalGitClient
    from dulwich.file import FileLocked

    if not isinstance(client, LocalGitClient):
        return client.send_pack(path, update_refs, pack_data)  # a server's own locks are its own

    sent: list[Any] = []
    with open_repo(Path(path)) as remote:
        if not write_ref(remote, ref, lambda: sent.append(client.send_pack(path, update_refs, pack_data))):
            raise FileLocked(os.fsencode(path), os.fsencode(os.path.join(path, ref + ".lock")))
    return sent[-1]


def _after_refusal(url: str, ref: str, commit: str, expected: str | None, said: str) -> PushOutcome:
    """What a refused update means, read again: someone else's push (already, moved), or the remote's own trouble
    (a lock held, a full disk) with the ref still as expected: unreachable for now, to be tried again."""
    try:
        now = remote_refs(url).get(ref)
    except Exception as e:  # noqa: BLE001  (the remote went away meanwhile: what it said is the record)
        return PushOutcome("unreachable", detail=f"the remote refused ({said}) and then could not be read: {e}")
    if now == commit:
        return PushOutcome("already", detail=said)
    if now != expected:
        return PushOutcome("moved", now, detail=said)
    return PushOutcome("unreachable", detail=f"the remote refused the update: {said}"[:2000])


def fetch_commit(repository: Path, url: str, ref: str, commit: str, *, reaching: bool = False) -> bool:
    """Bring the objects of commit, which the remote's ref must name (reaching: name, or have in its history), into
    the repository's object store; True when the commit is there afterwards. Names nothing locally (the caller's ref
    writes do). OSError and dulwich's errors propagate."""

    client, path = _client(url)
    wanted = object_id(commit)
    with open_repo(repository) as repo:
        if wanted in repo.object_store:
            return True

        def determine_wants(refs: dict[bytes, bytes], depth: int | None = None) -> list[bytes]:
            named = refs.get(ref.encode())
            return ([named] if named and (named == wanted or reaching) and object_id(named) not in repo.object_store
                    else [])

        client.fetch(path, repo, determine_wants=determine_wants)
        return wanted in repo.object_store


def _has_commit(repository: Path, commit: str) -> bool:
    with open_repo(repository) as repo:
        return object_id(commit) in repo.object_store


def redacted_url(url: str) -> str:
    """The URL as the ledger may keep it: a password in it (``https://user:token@host/...``) taken out."""

    if "://" not in url:
        return url  # a path, or scp-like user@host:path: no password to take out
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        where = parts.netloc.rsplit("@", 1)[1]  # host and port as written ([::1]:8443 keeps its brackets)
        netloc = (f"{parts.username}@" if parts.username else "") + where
    except ValueError:
        return url.split("://", 1)[0] + "://[redacted]"
    return urlunsplit(parts._replace(netloc=netloc))


def resolve_remote(repository: Path, remote: str, recorded_url: str | None = None) -> str:
    """The URL to reach the remote by, from the repository's config now. ValueError when the repository has no such
    remote, or when it now names another URL than the one recorded (recorded_url, as redacted_url gives it): an
    effect never goes where the run did not say."""
    url = remote_url(repository, remote)
    if recorded_url is not None and redacted_url(url) != recorded_url:
        raise ValueError(f"the remote {remote!r} is now {redacted_url(url)!r}, not {recorded_url!r} as the run "
                         "recorded: set it back (git remote set-url) for the run to go on")
    return url


def observe_remote_ref(repository: Path, remote: str, recorded_url: str, ref: str, *,
                       fetch: bool = False) -> RemoteRefObservation:
    """What ref names on the remote; with fetch, the commit's objects are brought into the repository too (found
    only once they are there). Never raises: a remote that cannot be reached or read, or has changed its URL, is
    unreachable, with why."""

    try:
        url = resolve_remote(repository, remote, recorded_url)
        commit = remote_refs(url, ref).get(ref)
        if commit is None:
            return RemoteRefObservation("missing")
        if fetch and not fetch_commit(repository, url, ref, commit):
            return RemoteRefObservation("unreachable", detail=f"{ref} names {commit} on the remote, but fetching it "
                                                              "brought nothing")
    except Exception as e:  # noqa: BLE001  (every failure to reach or read a remote is "nothing known")
        return RemoteRefObservation("unreachable", detail=f"{type(e).__name__}: {e}"[:2000])
    return RemoteRefObservation("found", commit)


class DulwichRemotes:
    """The remote port: observe a ref there, push one (create-only or compare-and-swap), fetch what one names."""

    def observe(self, repository: Path, remote: str, recorded_url: str, ref: str, *,
                fetch: bool = False) -> RemoteRefObservation:
        return observe_remote_ref(repository, remote, recorded_url, ref, fetch=fetch)

    def push(self, repository: Path, remote: str, recorded_url: str, ref: str, commit: str, *,
             expected: str | None) -> PushOutcome:
        try:
            url = resolve_remote(repository, remote, recorded_url)
        except ValueError as e:
            return PushOutcome("unreachable", detail=str(e))
        return push_ref(repository, url, ref, commit, expected=expected)

    def fetch(self, repository: Path, remote: str, recorded_url: str, ref: str, commit: str, *,
              reaching: bool = False) -> bool:
        """True when the commit is in the repository afterwards; False when the remote could not give it. A commit
        here already is not asked of the remote at all (it may be unreachable, or point elsewhere now)."""
        try:
            if _has_commit(repository, commit):
                return True
            return fetch_commit(repository, resolve_remote(repository, remote, recorded_url), ref, commit,
                                reaching=reaching)
        except Exception:  # noqa: BLE001  (the caller records the step as not known yet)
            return False
