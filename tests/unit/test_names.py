"""Resource and branch names: one normal form, git's rules, no characters that hide or drive a terminal."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from docket.domain import events as ev
from docket.domain.kernel.errors import BadInput
from docket.domain.kernel.names import check_branch_name, has_unsafe_characters, normalise_resource

from .builders import T0

ROOT = "/home/me/repo"


@pytest.mark.parametrize("spelling", [
    "wt/x", "./wt/x", "wt//x", "wt/x/", "wt/y/../x", "wt/./x", f"{ROOT}/wt/x", f"{ROOT}//wt/x/", f"//{ROOT}/wt/x",
])
def test_every_spelling_of_a_place_has_one_name(spelling):
    assert normalise_resource(spelling, ROOT) == "wt/x"


def test_names_that_are_not_paths_stay_as_they_are():
    assert normalise_resource("task:t1", ROOT) == "task:t1"
    assert normalise_resource("task:t1", None) == "task:t1"
    assert normalise_resource("caf\u00e9/\u00e9t\u00e9", None) == "caf\u00e9/\u00e9t\u00e9"


@pytest.mark.parametrize(("text", "root"), [
    ("../../outside", ROOT), ("wt/../../x", ROOT), ("..", ROOT), ("/etc/passwd", ROOT), ("/etc/passwd", None),
    (f"{ROOT}/wt/x", None), (f"{ROOT}/../outside", ROOT), (f"{ROOT}-other/wt", ROOT), (ROOT, ROOT), (ROOT + "/", ROOT),
    ("", ROOT), (".", ROOT), ("wt/..", ROOT), ("wt/\x00x", ROOT), ("wt/\x1bx", ROOT), ("wt/\nx", ROOT),
    ("wt/\x7fx", ROOT), ("wt/\x85x", ROOT), ("wt/\x9bx", ROOT), *(("wt/" + c + "x", ROOT) for c in
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"), ("wt/\u200bx", ROOT),
    ("wt/\u2028x", ROOT), ("wt/\ud800x", ROOT), ("w" * 513, ROOT), ("..a", ROOT), ("./..a/b", None),
])
def test_what_escapes_or_hides_is_refused(text, root):
    with pytest.raises(BadInput) as refused:
        normalise_resource(text, root)
    assert refused.value.code == "bad-resource"


def test_the_filesystem_root_as_repository_root():
    assert normalise_resource("/srv/x", "/") == "srv/x"
    assert normalise_resource("//srv/x", "/") == "srv/x"


@given(st.text(st.sampled_from("ab./:\u00e9") | st.characters(), max_size=40),
       st.sampled_from([None, "/", ROOT]))
@settings(max_examples=500)
@example("..a", None)
@example(".//a/./b/../", "/")
def test_normalising_is_idempotent_and_stays_inside(text, root):
    try:
        once = normalise_resource(text, root)
    except BadInput as e:
        assert e.code == "bad-resource"
        return
    assert normalise_resource(once, root) == once
    assert normalise_resource(once, None) == once
    assert not once.startswith(("/", "..")) and once not in ("", ".")
    assert not has_unsafe_characters(once)


def test_events_hold_only_normal_resources():
    def granted(resource: str) -> ev.LeaseGranted:
        return ev.LeaseGranted(stream=f"lease:{resource}", version=1, recorded_at=T0, resource=resource, run_id="r",
                               worker_id="w", generation=1, ttl_ms=1000, expires_at=T0, supersedes_token=None)

    assert granted("wt/x").resource == "wt/x"
    for spelling in ["./wt/x", "wt//x", "wt/x/", "/abs/wt/x", "../x", "wt/\u202ex", "wt/\x85x"]:
        with pytest.raises(ValidationError):
            granted(spelling)


@pytest.mark.parametrize("name", [
    "../../HEAD", "a..b", "main.lock", "a/b.lock/c", "@{-1}", "a@{b", "x/", "/x", "a//b", "-x", "a b", "@", "HEAD",
    ".a", "a/.b", "x.", "a:b", "a~1", "a^2", "a?", "a*", "a[b", "a\\b", "a\x00b", "a\x1bb", "a\x7fb", "a\x85b",
    "a\u202eb", "a\u200bb", "", "b" * 256,
])
def test_branch_names_git_or_a_terminal_would_refuse(name):
    with pytest.raises(BadInput) as refused:
        check_branch_name(name)
    assert refused.value.code == "bad-branch-name"


@pytest.mark.parametrize("name", ["main", "feature/a-b_c.d", "a./b", "release@2", "caf\u00e9", "a/HEAD", "{x}"])
def test_branch_names_git_accepts(name):
    assert check_branch_name(name) == name


def test_events_hold_only_valid_branch_names():
    def opened(branch: str) -> ev.RunOpened:
        return ev.RunOpened(stream="run:r", version=1, recorded_at=T0, run_id="r", goal="g", target_branch=branch,
                            budget_ms=None)

    assert opened("feature/x").target_branch == "feature/x"
    for name in ["a..b", "x/", "main.lock", "@{-1}", "a\u202eb"]:
        with pytest.raises(ValidationError):
            opened(name)
