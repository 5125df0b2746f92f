"""Ed25519 keys on disk, DSSE envelopes over in-toto Statements, and JSON Lines bundles of them."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docket.adapters.world.ledger import signing
from docket.domain.kernel.errors import BadInput, DocketError, NotFound, Refused, VerificationFailed
from tests.conftest import Docket

COMMIT = "d20ace7968ba43c0219f62d71334c1095bab1602"
RECEIPT_TYPE = "https://docket.example/receipt/v1"
ERROR_LINE = re.compile(r"docket: error: [a-z-]+: .+\n")


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return signing.generate_key(tmp_path / "docket")


@pytest.fixture
def signer(keys):
    return signing.load_signer(keys[0])


@pytest.fixture
def verifier(keys):
    return signing.load_verifier(keys[1])


def receipt(**predicate) -> dict:
    return signing.statement("main", {"gitCommit": COMMIT}, RECEIPT_TYPE, {"run": "r1", **predicate})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def with_byte_changed(text: str, index: int = 0) -> str:
    """The base64 text of the same bytes with one byte changed (still canonical base64)."""
    data = bytearray(base64.b64decode(text))
    data[index] ^= 0x01
    return b64(bytes(data))


# Keys


def test_generate_writes_a_private_pkcs8_pem_0600_and_a_public_pem_0644(tmp_path):
    private, public = signing.generate_key(tmp_path / "k")
    assert (private, public) == (tmp_path / "k.key", tmp_path / "k.pub")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) == 0o644
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----\n")  # PKCS8, unencrypted
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")  # SubjectPublicKeyInfo
    key = serialization.load_pem_private_key(private.read_bytes(), None)
    assert isinstance(key, ed25519.Ed25519PrivateKey)
    written = serialization.load_pem_public_key(public.read_bytes())
    assert key.public_key().public_bytes_raw() == written.public_bytes_raw()


def test_the_key_id_is_securesystemslibs_sha256_of_the_canonical_key(keys, signer, verifier):
    raw = serialization.load_pem_public_key(keys[1].read_bytes()).public_bytes_raw()
    canonical = json.dumps({"keytype": "ed25519", "keyval": {"public": raw.hex()}, "scheme": "ed25519"},
                           sort_keys=True, separators=(",", ":")).encode()
    assert verifier.keyid == signer.public_key.keyid == hashlib.sha256(canonical).hexdigest()


def test_two_generated_keys_differ(tmp_path):
    a, b = signing.generate_key(tmp_path / "a"), signing.generate_key(tmp_path / "b")
    assert signing.load_verifier(a[1]).keyid != signing.load_verifier(b[1]).keyid


@pytest.mark.parametrize("existing", ["k.key", "k.pub"])
def test_an_existing_key_file_is_never_overwritten_and_nothing_is_left_behind(tmp_path, existing):
    (tmp_path / existing).write_bytes(b"somebody's key\n")
    with pytest.raises(Refused) as refused:
        signing.generate_key(tmp_path / "k")
    assert refused.value.code == "key-exists" and refused.value.exit_code == 3
    assert (tmp_path / existing).read_bytes() == b"somebody's key\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing]


@pytest.mark.parametrize("linked", ["k.key", "k.pub"])
def test_a_symlink_at_a_key_path_is_refused_and_not_followed(tmp_path, linked):
    target = tmp_path / "elsewhere"
    (tmp_path / linked).symlink_to(target)
    with pytest.raises(BadInput) as refused:
        signing.generate_key(tmp_path / "k")
    assert refused.value.code == "symlink-refused"
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [linked]


def test_an_empty_prefix_or_a_missing_folder_is_bad_input(tmp_path):
    for prefix in ("", str(tmp_path) + "/", tmp_path / "no" / "deeper" / "k"):  # one missing folder is made, not two
        with pytest.raises(BadInput) as bad:
            signing.generate_key(prefix)
        assert bad.value.code == "bad-key-path"
    assert not (tmp_path / "no").exists()


def test_a_missing_folder_whose_parent_exists_is_made_0700_and_removed_again_when_nothing_is_written(tmp_path,
                                                                                                        monkeypatch):
    import stat

    private, _ = signing.generate_key(tmp_path / "keys" / "k")
    assert private.is_file() and stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700

    def full(path, mode):
        raise BadInput("bad-key-path", f"cannot create {path}: No space left on device")

    monkeypatch.setattr(signing, "_create_key_file", full)
    with pytest.raises(BadInput):
        signing.generate_key(tmp_path / "more" / "k")
    assert not (tmp_path / "more").exists()


def _pem_private(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_public(key) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_a_file_that_is_not_an_ed25519_pem_key_is_bad_key(tmp_path, keys):
    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    encrypted = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"))
    private_cases = {"notes": b"hello\n", "empty": b"", "ec": _pem_private(ec_key), "rsa": _pem_private(rsa_key),
                     "encrypted": encrypted, "public": keys[1].read_bytes(), "huge": b"x" * (70 * 1024)}
    public_cases = {"notes": b"hello\n", "ec": _pem_public(ec_key.public_key()),
                    "rsa": _pem_public(rsa_key.public_key()), "private": keys[0].read_bytes()}
    for load, cases in ((signing.load_signer, private_cases), (signing.load_verifier, public_cases)):
        for name, data in cases.items():
            path = tmp_path / f"{load.__name__}-{name}.pem"
            path.write_bytes(data)
            with pytest.raises(BadInput) as bad:
                load(path)
            assert bad.value.code == "bad-key", (load.__name__, name)


def test_a_missing_key_a_symlinked_key_and_a_folder_are_refused_by_name(tmp_path, keys):
    (tmp_path / "link.key").symlink_to(keys[0])
    (tmp_path / "link.pub").symlink_to(keys[1])
    (tmp_path / "folder").mkdir()
    for load, link in ((signing.load_signer, "link.key"), (signing.load_verifier, "link.pub")):
        for path, code, exit_code in ((tmp_path / "missing", "key-not-found", 5),  # not found, as the README says
                                      (tmp_path / link, "symlink-refused", 2),
                                      (tmp_path / "folder", "not-a-regular-file", 2)):
            with pytest.raises(DocketError) as bad:
                load(path)
            assert (bad.value.code, bad.value.exit_code) == (code, exit_code), (load.__name__, path.name)


# Statements and envelopes


def test_a_signed_statement_round_trips(signer, verifier):
    made = receipt(tasks=[{"id": "t1"}], head={"position": 12})
    envelope = signing.sign_statement(made, signer)
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert [set(s) for s in envelope["signatures"]] == [{"keyid", "sig"}]
    assert envelope["signatures"][0]["keyid"] == verifier.keyid
    assert base64.b64decode(envelope["payload"]) == json.dumps(
        made, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert signing.verify_envelope(envelope, verifier) == made


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(predicate=st.dictionaries(st.text(max_size=10), json_values, max_size=5), name=st.text(max_size=30))
def test_any_json_predicate_round_trips(signer, verifier, predicate, name):
    made = signing.statement(name, {"sha256": "ab" * 32}, RECEIPT_TYPE, predicate)
    assert signing.verify_envelope(signing.sign_statement(made, signer), verifier) == made


def test_the_envelope_verifies_independently_of_securesystemslib(keys, signer):
    """The DSSE spec's PAE computed by hand, the raw signature checked with cryptography alone."""
    envelope = signing.sign_statement(receipt(), signer)
    payload = base64.b64decode(envelope["payload"], validate=True)
    payload_type = envelope["payloadType"].encode()
    pae = b"DSSEv1 " + str(len(payload_type)).encode() + b" " + payload_type + b" " + \
        str(len(payload)).encode() + b" " + payload
    public = serialization.load_pem_public_key(keys[1].read_bytes())
    public.verify(base64.b64decode(envelope["signatures"][0]["sig"], validate=True), pae)  # raises if wrong
    statement = json.loads(payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": "main", "digest": {"gitCommit": COMMIT}}]


def _verify_code(envelope, verifier) -> str:
    with pytest.raises(VerificationFailed) as failed:
        signing.verify_envelope(envelope, verifier)
    assert failed.value.exit_code == 1
    return failed.value.code


def test_one_changed_byte_in_each_part_is_detected_with_its_code(signer, verifier):
    envelope = signing.sign_statement(receipt(), signer)
    (signature,) = envelope["signatures"]
    payload = {**envelope, "payload": with_byte_changed(envelope["payload"], 40)}
    sig = {**envelope, "signatures": [{**signature, "sig": with_byte_changed(signature["sig"], 5)}]}
    payload_type = {**envelope, "payloadType": "application/vnd.in-toto+jsom"}
    keyid = {**envelope, "signatures": [{**signature, "keyid": "1" + signature["keyid"][1:]
                                         if signature["keyid"][0] != "1" else "2" + signature["keyid"][1:]}]}
    assert _verify_code(payload, verifier) == "bad-signature"
    assert _verify_code(sig, verifier) == "bad-signature"
    assert _verify_code(payload_type, verifier) == "wrong-payload-type"
    assert _verify_code(keyid, verifier) == "wrong-key"


def test_a_change_of_any_one_byte_of_a_bundle_line_fails(tmp_path, signer, verifier):
    """Every position of the serialized envelope, changed: the line is no longer JSON, or it fails verification."""
    envelope = signing.sign_statement(receipt(), signer)
    line = json.dumps(envelope, sort_keys=True, separators=(",", ":"))
    caught = set()
    for i, char in enumerate(line):
        changed = line[:i] + chr(ord(char) ^ 0x01) + line[i + 1:]
        try:
            value = json.loads(changed)
        except ValueError:
            caught.add("not-json")
            continue
        caught.add(_verify_code(value, verifier))
    assert caught >= {"not-json", "bad-envelope", "wrong-key"}


def test_base64_that_is_not_spelled_canonically_is_a_bad_envelope(signer, verifier):
    """Stray low bits in the last character decode to the same bytes: refused, so no byte changes unseen."""
    envelope = signing.sign_statement(receipt(), signer)
    sig = envelope["signatures"][0]["sig"]  # 64 bytes: 88 characters ending in "=="
    assert sig.endswith("==")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    stray = alphabet[alphabet.index(sig[-3]) ^ 0x01]
    twin = sig[:-3] + stray + "=="
    assert base64.b64decode(twin) == base64.b64decode(sig)
    urlsafe = {**envelope, "payload": envelope["payload"].replace("+", "-").replace("/", "_")}
    unpadded = {**envelope, "payload": envelope["payload"].rstrip("=")}
    assert _verify_code({**envelope, "signatures": [{**envelope["signatures"][0], "sig": twin}]},
                        verifier) == "bad-envelope"
    if urlsafe != envelope:
        assert _verify_code(urlsafe, verifier) == "bad-envelope"
    if unpadded != envelope:
        assert _verify_code(unpadded, verifier) == "bad-envelope"


def test_a_wrong_key_is_named(tmp_path, signer):
    other = signing.load_verifier(signing.generate_key(tmp_path / "other")[1])
    assert _verify_code(signing.sign_statement(receipt(), signer), other) == "wrong-key"


def test_a_signature_under_the_right_keyid_by_another_key_is_a_bad_signature(tmp_path, signer, verifier):
    forger = signing.load_signer(signing.generate_key(tmp_path / "forger")[0])
    forged = signing.sign_statement(receipt(), forger)
    forged["signatures"][0]["keyid"] = verifier.keyid
    assert _verify_code(forged, verifier) == "bad-signature"


@pytest.mark.parametrize("envelope", [
    None, [], "envelope", {}, {"payload": "", "payloadType": "x"},
    {"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []},
    {"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": [{"keyid": "k"}]},
    {"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": [{"keyid": 1, "sig": "AA=="}]},
    {"payload": "e30=", "payloadType": 7, "signatures": [{"keyid": "k", "sig": "AA=="}]},
    {"payload": 7, "payloadType": "application/vnd.in-toto+json", "signatures": [{"keyid": "k", "sig": "AA=="}]},
    {"payload": "e30", "payloadType": "application/vnd.in-toto+json", "signatures": [{"keyid": "k", "sig": "AA=="}]},
    {"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": [{"keyid": "k", "sig": "A"}]},
    {"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": [{"keyid": "k", "sig": "AA=="}],
     "extra": 1},
], ids=repr)
def test_anything_but_a_dsse_envelope_with_one_signature_is_a_bad_envelope(verifier, envelope):
    assert _verify_code(envelope, verifier) == "bad-envelope"


def test_two_signatures_are_a_bad_envelope(signer, verifier):
    envelope = signing.sign_statement(receipt(), signer)
    envelope["signatures"] = envelope["signatures"] * 2
    assert _verify_code(envelope, verifier) == "bad-envelope"


def _signed_payload(payload: bytes, signer) -> dict:
    """An envelope over any payload, signed properly: what only a key holder's mistake could produce."""
    from securesystemslib.dsse import Envelope

    envelope = Envelope(payload, "application/vnd.in-toto+json", {})
    envelope.sign(signer)
    return envelope.to_dict()


@pytest.mark.parametrize("payload", [
    b"not json", b"\xff\xfe", b"[1,2]", b'{"_type":"https://in-toto.io/Statement/v1"}',
    b'{"_type":"https://in-toto.io/Statement/v0.1","predicate":{},"predicateType":"t",'
    b'"subject":[{"digest":{"sha256":"ab"},"name":"x"}]}',
    b'{"_type":"https://in-toto.io/Statement/v1","predicate":{},"predicateType":"t","subject":[]}',
    b'{"_type":"https://in-toto.io/Statement/v1","predicate":{},"predicateType":"t","subject":[{"name":"x"}]}',
    b'{"_type":"https://in-toto.io/Statement/v1","predicate":{},"predicateType":"t",'
    b'"subject":[{"digest":{},"name":"x"}]}',
    b'{"_type":"https://in-toto.io/Statement/v1","predicate":{},"predicateType":"",'
    b'"subject":[{"digest":{"sha256":"ab"},"name":"x"}]}',
    b'{"_type":"https://in-toto.io/Statement/v1","predicate":[],"predicateType":"t",'
    b'"subject":[{"digest":{"sha256":"ab"},"name":"x"}]}',
    b'{"_type": "https://in-toto.io/Statement/v1","predicate":{},"predicateType":"t",'  # not canonical: a space
    b'"subject":[{"digest":{"sha256":"ab"},"name":"x"}]}',
    b'{"_type":"https://in-toto.io/Statement/v1","predicate":{"a":1.5},"predicateType":"t",'  # a float
    b'"subject":[{"digest":{"sha256":"ab"},"name":"x"}]}',
    b'{"a":' * 100_000 + b'1' + b'}' * 100_000,  # nested past the parser's depth (was exit 70)
], ids=lambda p: p[:40].decode("utf-8", "replace"))
def test_a_signed_payload_that_is_not_a_canonical_statement_v1_is_a_bad_statement(signer, verifier, payload):
    assert _verify_code(_signed_payload(payload, signer), verifier) == "bad-statement"


def test_builders_refuse_what_is_not_a_statement(signer):
    with pytest.raises(ValueError):
        signing.statement("x", {}, RECEIPT_TYPE, {})
    with pytest.raises(ValueError):
        signing.sign_statement({"_type": "https://in-toto.io/Statement/v1"}, signer)


# The in-toto test-result predicate v0.1


def test_a_test_result_statement_follows_the_in_toto_predicate():
    configuration = [{"name": "docket.toml", "digest": {"sha256": "cd" * 32}}]
    predicate = signing.test_result_predicate("FAILED", configuration, url="docket:check/c1",
                                              passed_tests=["lint"], failed_tests=["unit"])
    assert predicate == {"result": "FAILED", "configuration": configuration, "url": "docket:check/c1",
                         "passedTests": ["lint"], "warnedTests": [], "failedTests": ["unit"]}
    made = signing.statement("main", {"gitCommit": COMMIT}, signing.TEST_RESULT_TYPE, predicate)
    assert made["predicateType"] == "https://in-toto.io/attestation/test-result/v0.1"
    assert "url" not in signing.test_result_predicate("PASSED", configuration)


@pytest.mark.parametrize("result, configuration", [("pass", []), ("passed", []), (True, []),
                                                   ("PASSED", [{"name": "no digest, uri or content"}]),
                                                   ("PASSED", "docket.toml")])
def test_a_test_result_outside_the_predicates_vocabulary_is_refused(result, configuration):
    with pytest.raises(ValueError):
        signing.test_result_predicate(result, configuration)


# Bundles


def test_a_bundle_round_trips_one_envelope_a_line(tmp_path, signer, verifier):
    envelopes = [signing.sign_statement(receipt(n=n), signer) for n in range(3)]
    path = signing.write_bundle(tmp_path / "receipt.jsonl", envelopes)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4 and all(json.loads(line) for line in lines[:-1])
    assert signing.read_bundle(path) == envelopes
    assert [signing.verify_envelope(e, verifier)["predicate"]["n"] for e in signing.read_bundle(path)] == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docket.key", "docket.pub", "receipt.jsonl"]


def test_a_bundle_is_created_once_and_never_overwritten(tmp_path, signer):
    path = tmp_path / "receipt.jsonl"
    path.write_text("kept\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "target")
    for target in (path, tmp_path / "link.jsonl"):
        with pytest.raises(Refused) as refused:
            signing.write_bundle(target, [signing.sign_statement(receipt(), signer)])
        assert refused.value.code == "output-exists"
    assert path.read_text() == "kept\n" and not (tmp_path / "target").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".draft")]
    with pytest.raises(BadInput) as bad:
        signing.write_bundle(tmp_path / "no" / "receipt.jsonl", [])
    assert bad.value.code == "bad-output-path"


@pytest.mark.parametrize("content, says", [
    (b"", "empty"), (b'{"a":1}', "newline"), (b'{"a":1}\n\n', "line 2"), (b"not json\n", "line 1"),
    (b'{"a":1}\n[1]\n', "line 2"), (b'{"a":1}\n\xff\n', "line 2"), (b"x" * 100 + b"\n", "larger"),
])
def test_a_file_that_is_not_a_bundle_is_named(tmp_path, content, says):
    path = tmp_path / "bundle.jsonl"
    path.write_bytes(content)
    with pytest.raises(VerificationFailed) as failed:
        signing.read_bundle(path, max_bytes=64)
    assert failed.value.code == "bad-bundle" and says in failed.value.message


def test_a_missing_or_symlinked_bundle_is_refused_by_name(tmp_path):
    with pytest.raises(NotFound) as missing:
        signing.read_bundle(tmp_path / "missing.jsonl")
    assert missing.value.code == "bundle-not-found"
    (tmp_path / "real.jsonl").write_text('{"a":1}\n')
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    with pytest.raises(BadInput) as link:
        signing.read_bundle(tmp_path / "link.jsonl")
    assert link.value.code == "symlink-refused"


# docket key generate, through the real CLI


@pytest.fixture
def cli(tmp_path):
    """The CLI in a folder with no repository or ledger: making a key needs neither."""
    return Docket(tmp_path, {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_")})


def test_key_generate_writes_the_pair_and_says_where(cli, tmp_path):
    result = cli("key", "generate", "--out", "keys-docket", "--json")
    document = result.json()
    assert document == {"private_key": "keys-docket.key", "public_key": "keys-docket.pub",
                        "keyid": signing.load_verifier(tmp_path / "keys-docket.pub").keyid}
    assert stat.S_IMODE((tmp_path / "keys-docket.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys-docket.pub").stat().st_mode) == 0o644
    assert result.stderr == ""
    human = cli("key", "generate", "--out", "second")
    assert "second.key" in human.stdout and "second.pub" in human.stdout and human.stderr == ""


def test_key_generate_refuses_an_existing_key_or_a_symlink_with_one_line(cli, tmp_path):
    cli("key", "generate", "--out", "k")
    before = (tmp_path / "k.key").read_bytes(), (tmp_path / "k.pub").read_bytes()
    again = cli("key", "generate", "--out", "k", check=False)
    assert again.returncode == 3 and ERROR_LINE.fullmatch(again.stderr) and "key-exists" in again.stderr
    assert ((tmp_path / "k.key").read_bytes(), (tmp_path / "k.pub").read_bytes()) == before
    (tmp_path / "s.key").symlink_to(tmp_path / "target")
    linked = cli("key", "generate", "--out", "s", "--json", check=False)
    assert linked.returncode == 2 and ERROR_LINE.fullmatch(linked.stderr) and "symlink-refused" in linked.stderr
    assert json.loads(linked.stdout)["error"]["code"] == "symlink-refused"
    assert not (tmp_path / "target").exists() and not (tmp_path / "s.pub").exists()
    usage = cli("key", "generate", check=False)
    assert usage.returncode == 2 and ERROR_LINE.fullmatch(usage.stderr) and "--out" in usage.stderr


def test_key_generate_under_a_narrow_umask_still_writes_0600_and_0644(cli, tmp_path):
    old = os.umask(0o077)  # inherited by the child: the public key must still be 0644, exactly
    try:
        cli("key", "generate", "--out", "narrow")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "narrow.pub").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "narrow.key").stat().st_mode) == 0o600
