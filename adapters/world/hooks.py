"""A hook's command in the world: claimed by a create-only marker, run behind the launch gate, its end written down.

Each hook intent owns five files in its folder (``<docket dir>/hooks/``), named
by its intent id: ``.started`` (the marker: the identity of the docket process
that claimed it, made create-only with its content, so two processes cannot
both claim it), ``.json`` (the event, the command's stdin), ``.log`` (its
output, never shown on docket's terminal), ``.process`` (the command's identity,
written before its gate opens) and ``.result`` (how it ended, written once).
What these files hold, and whether the processes they name live, is the
observation ``domain/hooks.py`` decides on. Two folders go with them:
``.base``, the hook's working directory, holding the run's base commit's
copies of the repository files its command names (``base_copies.py``: never a
checkout's copy, which a delivered candidate may have written), and ``.tmp``,
its TMPDIR. With the sandbox on, a hook writes only ``.tmp`` (and the ``write``
extras its table names): not the repository, its ``.git``, the ledger or
docket's folders; it reads its stdin document, ``.base`` and what any launch
reads (sandbox_roots.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ...domain.kernel.canonical import canonical_json
from ...domain.kernel.errors import Refused, StorageFailed
from ...domain.events import HookRequested
from ...domain.hooks import HookObservation
from ...domain.containment.processes import ProcessIdentity, bounded_tail, scrub_environment
from .files.logs import known_secrets
from . import faults
from .processes.host import host_id
from ...domain.kernel.codes import Code
from .files.files import own_folder
from .files.paths import configured_database_url, database_paths
from .processes.lifecycle import LaunchSpec, wait_for_group
from ...domain.containment.sandbox import Confinement
from .processes.sandbox_roots import sandbox_for
from ...domain.containment.trust import named_paths
from .workspaces.base_copies import materialise

__all__ = ["STOP_GRACE_SECONDS", "act", "observe"]

POLL_SECONDS = 0.02
STOP_GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL to the command's group at its timeout
_TAIL_BYTES = 65536


def _file(intent: HookRequested, suffix: str) -> Path:
    return Path(intent.directory) / f"{intent.intent_id}.{suffix}"


def _read_json(path: Path) -> Any:
    """The JSON in path; None when there is no file. OSError or ValueError for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return json.loads(f.read(1 << 16))


def _create_with(path: Path, data: bytes) -> bool:
    """Create path holding data, create-only and whole (never half-written); False if something is there already."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)


def _summary(log: Path) -> dict[str, Any]:
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    digest, size, end = hashlib.sha256(), 0, b""
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
            end = (end + chunk)[-_TAIL_BYTES:]
    return {"output_sha256": digest.hexdigest(), "output_bytes": size, "tail": bounded_tail(end, secrets=known_secrets())}


def observe(processes: Any, intent: HookRequested) -> HookObservation:
    """What the hook's files and the processes they name say now. Never raises."""
    try:
        result = _read_json(_file(intent, "result"))
        if result is not None:
            return HookObservation("finished", detail=result.get("message") or "", started=result["started"],
                                   result=result["result"], exit_code=result.get("exit_code"),
                                   signal=result.get("signal"), duration_ms=result.get("duration_ms"),
                                   sandbox=result.get("sandbox"), **_summary(_file(intent, "log")))
        owner = _read_json(_file(intent, "started"))
        if owner is None:
            return HookObservation("absent")
        claimed_by = ProcessIdentity.from_dict(owner)
        command = _read_json(_file(intent, "process"))
    except (OSError, ValueError, KeyError, TypeError) as e:
        return HookObservation("unknown", detail=f"the files of hook {intent.intent_id} cannot be read: {e}"[:4000])
    liveness = processes.liveness(claimed_by)
    if liveness != "dead":
        return HookObservation("running" if liveness == "alive" else "unknown",
                               detail=f"hook {intent.intent_id} is claimed by docket process {claimed_by.pid} on "
                                      f"{claimed_by.host}, which is {liveness}")
    if command is not None:
        group = processes.group_liveness(ProcessIdentity.from_dict(command))
        if group == "alive":
            return HookObservation("orphaned", started=True)
        if group == "unknown":
            return HookObservation("unknown", detail=f"whether hook {intent.intent_id}'s command still runs cannot "
                                                     "be told")
    return HookObservation("ended", started=command is not None, **_summary(_file(intent, "log")))


def act(processes: Any, intent: HookRequested, observed: HookObservation) -> None:
    """From absent: claim the hook and run its command to its end. From orphaned: stop the command's group."""
    if observed.state == "orphaned":
        command = _read_json(_file(intent, "process"))
        processes.terminate_group(ProcessIdentity.from_dict(command), grace=STOP_GRACE_SECONDS)
        return
    folder = Path(intent.directory)

    own_folder(folder.parent, folder)  # <docket>/hooks
    me = processes.identity(os.getpid())
    if me is None or not _create_with(_file(intent, "started"), canonical_json(me.as_dict())):
        return  # another process claimed it first: observe again
    faults.crash_point("hook:after-claim")
    started_at = time.monotonic()
    try:
        gated, sandbox = _spawn(processes, intent)
    except (OSError, ValueError, Refused, StorageFailed) as e:
        _finish(intent, {"result": "not-started", "started": False,
                         "message": f"the hook's command could not be started: {e}"[:4000]})
        return
    if not _create_with(_file(intent, "process"), canonical_json(gated.identity.as_dict())):
        gated.close_without_opening()
        raise FileExistsError(f"{_file(intent, 'process')} exists, but this process claimed the hook")
    try:
        gated.open()
    except BrokenPipeError:
        gated.popen.wait()
        _finish(intent, {"result": "not-started", "started": True, "sandbox": sandbox,
                         "message": "the hook's held process ended before its gate opened"})
        return
    faults.crash_point("hook:after-start")
    code, timed_out = _wait(processes, gated, intent.timeout_ms, _file(intent, "log"))
    duration_ms = int((time.monotonic() - started_at) * 1000)
    exit_code, signal = (code, None) if code >= 0 else (None, -code)
    if timed_out:
        result, message = "timed-out", f"stopped after its timeout of {intent.timeout_ms} ms"
    elif code == 0:
        result, message = "succeeded", None
    else:
        result = "failed"
        message = f"the hook's command exited {code}" if code > 0 else f"the hook's command was killed by signal {signal}"
    _finish(intent, {"result": result, "started": True, "exit_code": exit_code, "signal": signal,
                     "duration_ms": duration_ms, "message": message, "sandbox": sandbox})
    faults.crash_point("hook:after-exit")


def _reader_of(ledger: str) -> Any:
    """The reader of the ledger a hook's intent names: its file, or, for the name a PostgreSQL ledger has on this
    machine (paths.py), the database this process's DOCKET_DATABASE_URL names when that is the same one."""
    path = Path(ledger)
    if not path.name.endswith(".postgres"):
        from .ledger.reader import ledger_reader

        return ledger_reader(path)

    url = configured_database_url(Path.cwd())
    if not url or database_paths(url, None).ledger.name != path.name:
        raise ValueError(f"the hook's ledger is the database {path.name}, which this process is not given "
                         "(DOCKET_DATABASE_URL)")
    from .ledger.postgres_reader import postgres_reader  # here: psycopg is an extra, imported where a URL names it

    return postgres_reader(url)


def _spawn(processes: Any, intent: HookRequested) -> tuple[Any, dict[str, Any]]:
    """The hook's command started in its own process group, held at the launch gate, the event on its stdin; and
    the record of the sandbox it runs in (HookFinished keeps it)."""

    with _reader_of(intent.ledger) as reader:
        row = reader.event_at(intent.position)
    if row is None:
        raise ValueError(f"the ledger {intent.ledger} has no event at position {intent.position}")
    _, stream, _, type_name, state = row
    body = json.loads(state)
    document = {"position": intent.position, "stream": stream, "type": type_name,
                "recorded_at": body["recorded_at"], "payload": body["payload"]}
    stdin = _file(intent, "json")
    if not _create_with(stdin, canonical_json(document) + b"\n"):
        raise FileExistsError(f"{stdin} appeared while it was being written")
    env, _removed = scrub_environment(os.environ, intent.env_allow)
    env = {name: value for name, value in env.items() if not name.startswith("DOCKET_")}
    env.update(DOCKET_RUN=intent.run_id, DOCKET_EVENT=type_name, DOCKET_POSITION=str(intent.position),
               DOCKET_HOOK=intent.hook, DOCKET_LEDGER=intent.ledger,
               DOCKET_HOST=host_id())
    task = body["payload"].get("task_id")
    if isinstance(task, str):
        env["DOCKET_TASK"] = task

    network = intent.network if isinstance(intent.network, str) else tuple(intent.network)
    confinement = Confinement(mode=intent.sandbox, read=tuple(intent.read), write=tuple(intent.write), network=network)
    # A hook notifies: it runs in a private folder holding the base's copies of the repository files it names (never
    # a checkout's, which a delivered candidate may have written), reads those and its stdin, and writes only its
    # own TMPDIR (and the write extras its table names): not the repository, its .git, nor docket's folder.
    workdir = _workdir(intent)
    sandbox = sandbox_for(confinement, write=[], read=[stdin, workdir], temporary=_file(intent, "tmp"),
                          argv=intent.argv, env=env, cwd=workdir)
    gated = processes.spawn_gated(LaunchSpec(argv=tuple(intent.argv), cwd=workdir, env=env,
                                             log_path=_file(intent, "log"), stdin_path=stdin, sandbox=sandbox))
    return gated, sandbox.record().model_dump(mode="json")


def _workdir(intent: HookRequested) -> Path:
    """The hook's working directory, made: ``<intent id>.base``, holding the run's base commit's copies of the
    repository files its command names (base_copies.py). Refused (script-not-from-base) when it names one and the
    intent has no base (asked for before docket recorded it) or the base cannot be read."""

    folder = _file(intent, "base")
    names = named_paths([intent.argv])
    if not names:
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder
    if intent.base is None:
        raise Refused(Code.SCRIPT_NOT_FROM_BASE, f"the hook names {sorted(names)!r} of the repository, and its request "
                                                 "records no base commit to take them from")
    try:
        materialise(Path(intent.repository), intent.base, names, folder)
    except (KeyError, ValueError) as e:
        raise Refused(Code.SCRIPT_NOT_FROM_BASE, f"the base commit {intent.base} cannot be read: {e}") from e
    return folder


def _wait(processes: Any, gated: Any, timeout_ms: int, log_path: Path) -> tuple[int, bool]:
    """(returncode, whether it was stopped at its timeout); nothing of its group is left running after; its log
    kept under the default cap (log_cap.py)."""

    code, cause = wait_for_group(processes, gated, timeout_ms=timeout_ms, grace=STOP_GRACE_SECONDS, poll=POLL_SECONDS,
                                 log_path=log_path)
    return code, cause is not None


def _finish(intent: HookRequested, result: dict[str, Any]) -> None:
    """Write the result once, whole: the next observation records it."""
    path = _file(intent, "result")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(canonical_json(result))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
