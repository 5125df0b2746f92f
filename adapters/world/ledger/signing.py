"""Ed25519 keys, DSSE envelopes and in-toto Statements: what a receipt is signed and checked with.

The envelope, its pre-authentication encoding and the signatures are
securesystemslib's (``dsse.Envelope``, ``CryptoSigner``, ``SSlibKey``); this
module adds strict shapes around them, so that a changed byte anywhere in an
envelope is refused with a code naming what failed. A key's id is
securesystemslib's default: the SHA-256 of the canonical JSON of
``{"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": <hex>}}``.

securesystemslib and cryptography are imported inside the functions that use
them: `docket status` must not pay for them.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain.kernel.canonical import CanonicalJSONError, DuplicateKey, canonical_json, strict_json
from ....domain.kernel.errors import BadInput, NotFound, OutputExists, Refused, VerificationFailed
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from securesystemslib.signer import CryptoSigner, SSlibKey

__all__ = [
    "MAX_BUNDLE_BYTES",
    "PAYLOAD_TYPE",
    "STATEMENT_TYPE",
    "TEST_RESULT_TYPE",
    "check_statement",
    "generate_key",
    "load_signer",
    "load_verifier",
    "read_bundle",
    "sign_statement",
    "statement",
    "test_result_predicate",
    "verify_envelope",
    "write_bundle",
]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
TEST_RESULT_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
TEST_RESULTS = ("PASSED", "WARNED", "FAILED")
MAX_KEY_BYTES = 64 * 1024
MAX_BUNDLE_BYTES = 256 * 1024 * 1024

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a FIFO must not hang
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


# Keys


def generate_key(prefix: str | Path) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: PREFIX.key (PKCS8 PEM, 0600) and PREFIX.pub (SubjectPublicKeyInfo PEM, 0644).

    Both files are created create-only without following symlinks: an existing
    file is never overwritten (Refused key-exists), a symlink at either path is
    refused (symlink-refused). If the public file cannot be created, the private
    file created a moment before is removed again.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )

    private_path, public_path = _key_paths(prefix)
    made_folder = _make_folder(private_path.parent)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public_pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    created: list[tuple[int, Path, bytes]] = []
    try:
        created.append((_create_key_file(private_path, 0o600), private_path, private_pem))
        created.append((_create_key_file(public_path, 0o644), public_path, public_pem))
        for fd, _, data in created:
            _write_all(fd, data)
    except BaseException:
        for _, path, _ in created:
            path.unlink(missing_ok=True)  # ours: created a moment ago, create-only
        if made_folder:
            private_path.parent.rmdir()
        raise
    finally:
        for fd, _, _ in created:
            os.close(fd)
    return private_path, public_path


def default_key_folder() -> Path:
    """docket's own place for keys, ~/.docket (docs/go.md's example writes ~/.docket/signing)."""
    return Path.home() / ".docket"


def _make_folder(folder: Path) -> bool:
    """The key's folder made when missing, 0700 (docket's own ~/.docket, or keys/ of keys/docket), but only that
    one folder: one whose parent is missing too is refused (bad-key-path), a typo making no tree of folders.
    Whether it was made here."""
    try:
        if os.path.abspath(folder) == os.path.abspath(default_key_folder()) or not os.path.lexists(folder):
            os.mkdir(folder, 0o700)
            return True
    except FileExistsError:
        pass
    except FileNotFoundError:
        raise BadInput(Code.BAD_KEY_PATH, f"the folder of {_name(folder)} does not exist") from None
    except (OSError, RuntimeError) as e:  # RuntimeError: no home directory to expand
        raise BadInput(Code.BAD_KEY_PATH, f"cannot create {_name(folder)}: {getattr(e, 'strerror', None) or e}") from None
    return False


def _key_paths(prefix: str | Path) -> tuple[Path, Path]:
    text = str(prefix)
    if not text or text.endswith(("/", os.sep)):
        raise BadInput(Code.BAD_KEY_PATH, f"--out {_name(Path(text))!r} must name a file prefix, such as keys/docket")
    return Path(text + ".key"), Path(text + ".pub")


def _create_key_file(path: Path, mode: int) -> int:
    try:
        fd = os.open(path, _CREATE_FLAGS, mode)
    except FileExistsError:
        if _is_symlink(path):
            raise BadInput(Code.SYMLINK_REFUSED, f"{_name(path)} is a symlink; docket does not follow it") from None
        raise Refused(Code.KEY_EXISTS, f"{_name(path)} already exists; docket never overwrites a key") from None
    except FileNotFoundError:
        raise BadInput(Code.BAD_KEY_PATH, f"the folder of {_name(path)} does not exist") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise BadInput(Code.BAD_KEY_PATH, f"cannot create {_name(path)}: {getattr(e, 'strerror', None) or e}") from None
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed the creation mode; be exact
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def load_signer(private_pem_path: str | Path) -> CryptoSigner:
    """A signer for the unencrypted Ed25519 PKCS8 PEM private key at the path (BadInput bad-key otherwise)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    path = Path(private_pem_path)
    data = _read_key_file(path)
    try:
        key = load_pem_private_key(data, password=None)
    except TypeError:
        raise BadInput(Code.BAD_KEY, f"{_name(path)} is an encrypted private key; docket needs an unencrypted one"
                       ) from None
    except Exception:  # noqa: BLE001 - cryptography raises ValueError or UnsupportedAlgorithm for anything else
        raise BadInput(Code.BAD_KEY, f"{_name(path)} is not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(Code.BAD_KEY, f"{_name(path)} is not an Ed25519 private key")
    return CryptoSigner(key)


def load_verifier(public_pem_path: str | Path) -> SSlibKey:
    """The Ed25519 public key in the SubjectPublicKeyInfo PEM file at the path (BadInput bad-key otherwise)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from securesystemslib.signer import SSlibKey

    path = Path(public_pem_path)
    data = _read_key_file(path)
    try:
        key = load_pem_public_key(data)
    except Exception:  # noqa: BLE001 - ValueError or UnsupportedAlgorithm
        raise BadInput(Code.BAD_KEY, f"{_name(path)} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(Code.BAD_KEY, f"{_name(path)} is not an Ed25519 public key")
    return SSlibKey.from_crypto(key)


def _read_key_file(path: Path) -> bytes:
    return _read_regular_file(path, MAX_KEY_BYTES, missing=NotFound(Code.KEY_NOT_FOUND, f"no key file at {_name(path)}"),
                              too_large=BadInput(Code.BAD_KEY, f"{_name(path)} is larger than a key file can be"),
                              unreadable="bad-key")


def _read_regular_file(path: Path, limit: int, *, missing: Exception, too_large: Exception, unreadable: str) -> bytes:
    """The bytes of a regular file opened without following a symlink, at most limit of them."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise missing from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        if _is_symlink(path):
            raise BadInput(Code.SYMLINK_REFUSED, f"{_name(path)} is a symlink; docket does not follow it") from None
        raise BadInput(unreadable, f"cannot open {_name(path)}: {getattr(e, 'strerror', None) or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInput(Code.NOT_A_REGULAR_FILE, f"{_name(path)} is not a regular file")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise too_large
    return data


def _name(path: Path) -> str:
    """path for a message: a name of thousands of characters is cut."""
    text = str(path)
    return text if len(text) <= 200 else f"{text[:100]}...({len(text)} characters)"


def _is_symlink(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


# Statements


def statement(subject_name: str, digests: dict[str, str], predicate_type: str,
              predicate: dict[str, Any]) -> dict[str, Any]:
    """An in-toto Statement v1 about one subject (digests: algorithm -> hex, e.g. {"gitCommit": ...})."""
    made = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name, "digest": dict(digests)}],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    problem = _statement_problem(made)
    if problem:
        raise ValueError(problem)
    return made


def test_result_predicate(result: str, configuration: Sequence[dict[str, Any]], *, url: str | None = None,
                          passed_tests: Iterable[str] = (), warned_tests: Iterable[str] = (),
                          failed_tests: Iterable[str] = ()) -> dict[str, Any]:
    """The in-toto test-result predicate v0.1 (predicate type TEST_RESULT_TYPE).

    result is PASSED, WARNED or FAILED; configuration lists ResourceDescriptors
    (each with at least one of uri, digest, content) for what the tests ran with;
    url optionally points at the test run; the three lists name the tests.
    """
    if result not in TEST_RESULTS:
        raise ValueError(f"a test result is one of {', '.join(TEST_RESULTS)}, not {result!r}")
    if not isinstance(configuration, Sequence) or not all(
            isinstance(d, dict) and ({"uri", "digest", "content"} & d.keys()) for d in configuration):
        raise ValueError("configuration is a list of ResourceDescriptors, each with a uri, digest or content")
    predicate: dict[str, Any] = {"result": result, "configuration": [dict(d) for d in configuration]}
    if url is not None:
        predicate["url"] = url
    for name, tests in (("passedTests", passed_tests), ("warnedTests", warned_tests), ("failedTests", failed_tests)):
        predicate[name] = list(tests)
        if not all(isinstance(test, str) for test in predicate[name]):
            raise ValueError(f"{name} holds test names (strings)")
    return predicate


def check_statement(value: Any) -> dict[str, Any]:
    """value if it is an in-toto Statement v1, else VerificationFailed bad-statement naming what is wrong."""
    problem = _statement_problem(value)
    if problem:
        raise VerificationFailed(Code.BAD_STATEMENT, problem)
    return value


def _statement_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "the payload is not a JSON object"
    if value.get("_type") != STATEMENT_TYPE:
        return f"_type is not {STATEMENT_TYPE}"
    subjects = value.get("subject")
    if not isinstance(subjects, list) or not subjects:
        return "subject is not a non-empty list"
    for i, subject in enumerate(subjects):
        if not isinstance(subject, dict) or not isinstance(subject.get("name"), str):
            return f"subject[{i}] has no name"
        digest = subject.get("digest")
        if not isinstance(digest, dict) or not digest or not all(
                isinstance(k, str) and k and isinstance(v, str) and v for k, v in digest.items()):
            return f"subject[{i}].digest is not a non-empty map of algorithm to digest"
    if not isinstance(value.get("predicateType"), str) or not value["predicateType"]:
        return "predicateType is not a non-empty string"
    if not isinstance(value.get("predicate"), dict):
        return "predicate is not a JSON object"
    return None


# Envelopes


def sign_statement(statement: dict[str, Any], signer: CryptoSigner) -> dict[str, Any]:
    """A DSSE envelope whose payload is the canonical JSON of the statement, signed by signer over the DSSE PAE."""
    from securesystemslib.dsse import Envelope

    problem = _statement_problem(statement)
    if problem:
        raise ValueError(problem)
    envelope = Envelope(canonical_json(statement), PAYLOAD_TYPE, {})
    envelope.sign(signer)
    return envelope.to_dict()


def verify_envelope(envelope: Any, verifier: SSlibKey) -> dict[str, Any]:
    """The statement the envelope carries, once everything about it checks; else VerificationFailed.

    Codes, checked in this order: bad-envelope (not a DSSE envelope with one
    signature, or base64 not in its one canonical spelling), wrong-payload-type,
    wrong-key (its signature names another key id than verifier's),
    bad-signature, bad-statement (not canonical JSON, or not an in-toto
    Statement v1).
    """
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import UnverifiedSignatureError
    from securesystemslib.signer import Signature

    payload, payload_type, keyid, sig = _envelope_parts(envelope)
    if payload_type != PAYLOAD_TYPE:
        raise VerificationFailed(Code.WRONG_PAYLOAD_TYPE, f"payloadType is {payload_type[:80]!r}, not {PAYLOAD_TYPE}")
    if keyid != verifier.keyid:
        raise VerificationFailed(Code.WRONG_KEY, f"the envelope is signed by key {keyid[:80]!r}, not by the given key "
                                              f"{verifier.keyid}")
    dsse = Envelope(payload, payload_type, {keyid: Signature(keyid, sig.hex())})
    try:
        dsse.verify([verifier], 1)
    except UnverifiedSignatureError:
        raise VerificationFailed(Code.BAD_SIGNATURE, f"the signature by key {keyid} does not match the envelope's "
                                                  "payload and payloadType") from None
    try:
        value = strict_json(payload.decode("utf-8"))
        canonical = canonical_json(value) == payload
    except DuplicateKey as e:
        raise VerificationFailed(Code.BAD_STATEMENT, f"the payload is not canonical JSON: {e}") from None
    except (UnicodeDecodeError, ValueError, RecursionError, CanonicalJSONError):
        raise VerificationFailed(Code.BAD_STATEMENT, "the payload is not JSON (or nested too deeply)") from None
    if not canonical:
        raise VerificationFailed(Code.BAD_STATEMENT, "the payload is not canonical JSON")
    return check_statement(value)


def _envelope_parts(envelope: Any) -> tuple[bytes, str, str, bytes]:
    """payload, payloadType, keyid and signature of a DSSE envelope with exactly one signature."""
    if not isinstance(envelope, dict) or set(envelope) != {"payload", "payloadType", "signatures"}:
        raise VerificationFailed(Code.BAD_ENVELOPE, "not a DSSE envelope (payload, payloadType, signatures)")
    signatures = envelope["signatures"]
    if not isinstance(envelope["payloadType"], str) or not isinstance(signatures, list) or len(signatures) != 1:
        raise VerificationFailed(Code.BAD_ENVELOPE, "a DSSE envelope has a payloadType string and one signature")
    (signature,) = signatures
    if not isinstance(signature, dict) or set(signature) != {"keyid", "sig"} or not isinstance(
            signature["keyid"], str):
        raise VerificationFailed(Code.BAD_ENVELOPE, "a signature is {keyid, sig}")
    return (_canonical_base64(envelope["payload"], "payload"), envelope["payloadType"], signature["keyid"],
            _canonical_base64(signature["sig"], "sig"))


def _canonical_base64(text: Any, field: str) -> bytes:
    """Standard base64 spelled the one way it encodes (padded, no stray bits), so no byte can change unseen."""
    try:
        data = base64.b64decode(text, validate=True) if isinstance(text, str) else None
    except (binascii.Error, ValueError):
        data = None
    if data is None or base64.b64encode(data).decode("ascii") != text:
        raise VerificationFailed(Code.BAD_ENVELOPE, f"{field} is not canonical standard base64")
    return data


# Bundles: JSON Lines, one envelope a line


def write_bundle(path: str | Path, envelopes: Iterable[dict[str, Any]]) -> Path:
    """Write the envelopes to a new file at path, one compact JSON object a line; never overwrites.

    The lines go to a hidden draft beside path, fsynced, then linked into place
    (link fails if path exists: Refused output-exists), so path is either absent
    or whole.
    """
    path = Path(path)
    lines = b"".join(json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
                     + b"\n" for e in envelopes)
    draft = path.with_name(f".{path.name}.{os.getpid()}.draft")
    try:
        fd = os.open(draft, _CREATE_FLAGS, 0o644)
    except FileNotFoundError:
        raise BadInput(Code.BAD_OUTPUT_PATH, f"the folder of {_name(path)} does not exist") from None
    except ValueError:
        raise BadInput(Code.BAD_OUTPUT_PATH, f"{path!r} is not a file name") from None
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(lines)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:
            raise OutputExists(f"{_name(path)} already exists; docket never overwrites it") from None
    finally:
        draft.unlink(missing_ok=True)
    return path


def read_bundle(path: str | Path, max_bytes: int = MAX_BUNDLE_BYTES) -> list[dict[str, Any]]:
    """The envelopes of a bundle, as JSON objects, without checking them; VerificationFailed bad-bundle for a
    file that is not JSON Lines of objects (every line ends with a newline), NotFound bundle-not-found."""
    path = Path(path)
    data = _read_regular_file(
        path, max_bytes, missing=NotFound(Code.BUNDLE_NOT_FOUND, f"no bundle at {_name(path)}"),
        too_large=VerificationFailed(Code.BAD_BUNDLE, f"{_name(path)} is larger than {max_bytes} bytes"),
        unreadable="bad-bundle-path")
    if not data:
        raise VerificationFailed(Code.BAD_BUNDLE, f"{_name(path)} is empty")
    if not data.endswith(b"\n"):
        raise VerificationFailed(Code.BAD_BUNDLE, f"{_name(path)} does not end with a newline")
    envelopes = []
    for number, line in enumerate(data[:-1].split(b"\n"), start=1):
        try:
            value = strict_json(line.decode("utf-8"))
        except DuplicateKey as e:  # parsers disagree on which one counts: a signed line is read one way only
            raise VerificationFailed(Code.BAD_BUNDLE, f"line {number} of {_name(path)}: {e}") from None
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise VerificationFailed(Code.BAD_BUNDLE, f"line {number} of {_name(path)} is not JSON (or nested too "
                                                     "deeply)") from None
        if not isinstance(value, dict):
            raise VerificationFailed(Code.BAD_BUNDLE, f"line {number} of {_name(path)} is not a JSON object")
        envelopes.append(value)
    return envelopes
