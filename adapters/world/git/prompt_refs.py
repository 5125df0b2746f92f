"""Task prompts on the shared git remote, for the other hosts of a run: a blob under ``refs/docket/prompts/<sha256>``.

The ledger binds each prompt by its digest (TaskPlanned); the host that plans a run keeps the text beside its
ledger (``prompts.py``). In a run with a shared remote it also pushes the text there as a blob, create-only, so a
host that takes a task over can launch it. What is fetched is kept only if it has the digest the ledger names: a
ref on the remote naming other content changes nothing (``prompt-changed``), and nothing is ever forced.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from ....domain.kernel.codes import Code
from .ids import object_id
from .remote import push_ref, resolve_remote, fetch_commit, remote_refs
from .repository import open_repo
from ....domain.kernel.errors import VerificationFailed
from ..files.prompts import MAX_PROMPT_BYTES

__all__ = ["PROMPT_REFS", "fetch_prompt", "publish_prompt"]

PROMPT_REFS = "refs/docket/prompts/"


def publish_prompt(repository: Path, remote: str, recorded_url: str, text: str) -> str:
    """Push the prompt's text to the run's remote under its digest; the push's outcome (pushed, already, moved:
    another text under that name, which no reader trusts; unreachable: with why)."""
    from dulwich.objects import Blob

    data = text.encode("utf-8")
    blob = Blob.from_string(data)
    with open_repo(repository) as repo:
        if blob.id not in repo.object_store:
            repo.object_store.add_object(blob)
    try:
        url = resolve_remote(repository, remote, recorded_url)
    except ValueError as e:
        return f"unreachable: {e}"
    outcome = push_ref(repository, url, PROMPT_REFS + hashlib.sha256(data).hexdigest(), blob.id.decode("ascii"),
                       expected=None)
    return outcome.state if not outcome.detail or outcome.state != "unreachable" else f"unreachable: {outcome.detail}"


def fetch_prompt(repository: Path, remote: str, recorded_url: str, sha256: str) -> str | None:
    """The prompt with that digest, from the run's remote; None when the remote has none (or cannot be reached).
    VerificationFailed ``prompt-changed`` when what the remote names under that digest is another text."""
    from dulwich.objects import Blob

    ref = PROMPT_REFS + sha256
    try:
        url = resolve_remote(repository, remote, recorded_url)
        blob_id = remote_refs(url, prefix=ref).get(ref)
        if blob_id is None or not fetch_commit(repository, url, ref, blob_id):
            return None
    except Exception:  # noqa: BLE001  (an unreachable remote, in any of dulwich's ways: the prompt stays missing)
        return None
    with open_repo(repository) as repo:
        blob = repo.object_store[object_id(blob_id)]
    data = blob.as_raw_string() if isinstance(blob, Blob) else b""
    if len(data) > MAX_PROMPT_BYTES or hashlib.sha256(data).hexdigest() != sha256:
        raise VerificationFailed(Code.PROMPT_CHANGED, f"the remote's {ref} does not hold the prompt the ledger names")
    return data.decode("utf-8")
