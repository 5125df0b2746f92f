"""Binding ids and candidate refs: derived from content only, exactly as DOMAIN-NOTES step 5 spells them."""

from __future__ import annotations

import hashlib
import json

import pytest

from docket.domain.binding import (
    BINDING_VERSION,
    binding_id,
    binding_seed,
    candidate_ref,
    worktree_identity,
)
from docket.domain.kernel.errors import BadInput

HEAD, TREE = "a" * 40, "b" * 40


def sha256_of(value: dict) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_each_digest_is_sha256_of_the_canonical_json_of_its_fields() -> None:
    identity = worktree_identity("/w/t1", "/r/.git")
    assert identity == sha256_of({"realpath": "/w/t1", "git_dir": "/r/.git"})
    seed = binding_seed("run-1", "implementation-1")
    assert seed == sha256_of({"run_id": "run-1", "boundary": "implementation-1"})
    assert binding_id(seed, HEAD, TREE, ["b.txt", "a.txt"], identity) == sha256_of({
        "version": BINDING_VERSION, "binding_seed": seed, "expected_head": HEAD, "tree": TREE,
        "changed_paths": ["a.txt", "b.txt"], "worktree_identity": identity,
    })
    assert BINDING_VERSION == "docket-binding-v1"


def test_the_binding_id_changes_with_every_input_and_not_with_the_order_of_paths() -> None:
    seed, identity = binding_seed("run-1", "b1"), worktree_identity("/w", "/g")
    base = binding_id(seed, HEAD, TREE, ["x", "y"], identity)
    assert binding_id(seed, HEAD, TREE, ["y", "x"], identity) == base
    others = [
        binding_id(binding_seed("run-2", "b1"), HEAD, TREE, ["x", "y"], identity),
        binding_id(binding_seed("run-1", "b2"), HEAD, TREE, ["x", "y"], identity),
        binding_id(seed, "c" * 40, TREE, ["x", "y"], identity),
        binding_id(seed, HEAD, "c" * 40, ["x", "y"], identity),
        binding_id(seed, HEAD, TREE, ["x"], identity),
        binding_id(seed, HEAD, TREE, ["x", "y"], worktree_identity("/w2", "/g")),
    ]
    assert len({base, *others}) == 7


def test_object_ids_must_be_full_hex() -> None:
    with pytest.raises(BadInput) as caught:
        binding_id("s", "HEAD", TREE, [], "i")
    assert caught.value.code == "bad-object-id"


def test_the_candidate_ref_names_run_and_binding() -> None:
    binding = "0" * 64
    assert candidate_ref("run-7k2m", binding) == f"refs/docket/candidates/run-7k2m/{binding}"


@pytest.mark.parametrize(("run", "binding"), [
    ("run-1", "0" * 63), ("run-1", "G" * 64), ("run-1", "../" + "0" * 61), ("", "0" * 64), ("a/b", "0" * 64),
    ("..", "0" * 64), ("run.lock", "0" * 64), ("run 1", "0" * 64), ("run~1", "0" * 64), (".run", "0" * 64),
])
def test_a_ref_git_would_refuse_or_that_could_escape_is_refused(run: str, binding: str) -> None:
    with pytest.raises(BadInput) as caught:
        candidate_ref(run, binding)
    assert caught.value.code == "bad-candidate-ref"


@pytest.mark.parametrize("raw, text", [
    (b"plain/a.txt", "plain/a.txt"),
    ("ü 日本.txt".encode(), "ü 日本.txt"),
    (b"new\nline", '"new\\nline"'),
    (b'q"uote', '"q\\"uote"'),
    (b"back\\slash", '"back\\\\slash"'),
    (b"bell\x07\x01\x7f", '"bell\\a\\001\\177"'),
    (b"\xff\xfe", '"\\377\\376"'),
    ("é".encode() + b"\xff", '"é\\377"'),
])
def test_a_path_has_one_text_form_that_drives_no_terminal(raw, text):
    from docket.domain.binding import quote_path

    assert quote_path(raw) == text
