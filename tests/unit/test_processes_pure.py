"""The pure process rules: liveness, what counts as a secret, redaction and bounded log tails."""

from __future__ import annotations

import fnmatch
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from docket.domain.containment.processes import (
    SECRET_NAME,
    ProcessIdentity,
    bounded_tail,
    glob_matches,
    last_line,
    liveness_of,
    looks_secret_value,
    redact,
    scrub_environment,
)

ME = ProcessIdentity(host="h1", boot_id="b1", pid=4242, pgid=4242, start_time="123456")


def live(identity=ME, *, host="h1", boot_id="b1", start_time_now="123456", exists=True):
    return liveness_of(identity, host=host, boot_id=boot_id, start_time_now=start_time_now, exists=exists)


def test_identity_round_trips_through_a_dict():
    assert ProcessIdentity.from_dict(ME.as_dict()) == ME
    assert ME.as_dict() == {"host": "h1", "boot_id": "b1", "pid": 4242, "pgid": 4242, "start_time": "123456"}


def test_liveness_rule():
    assert live() == "alive"
    assert live(exists=False, start_time_now=None) == "dead"
    assert live(start_time_now="999") == "dead"  # the pid was reused
    assert live(exists=None, start_time_now=None) == "unknown"
    assert live(boot_id="b2") == "dead"


def test_another_host_is_never_dead():
    for exists in (True, False, None):
        assert live(host="h2", exists=exists, boot_id="b2", start_time_now="1") == "unknown"


# --- names and values -----------------------------------------------------------------------------------------------

SECRET_NAMES = ["MY_API_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "GITHUB_TOKEN", "GH_TOKEN", "NPM_TOKEN",
                "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DB_PASSWORD", "DB_PASS", "MYSQL_PWD_PASSWD", "API_KEY",
                "PRIVATE_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "CLOUDSDK_CONFIG",
                "GCP_PROJECT", "SESSION_COOKIE", "HTTP_AUTH", "apikey", "npm_config__authToken", "KEY",
                "SENTRY_DSN", "HF_TOKEN"]
INNOCENT_NAMES = ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "SHELL", "TMPDIR", "PWD", "OLDPWD", "MONKEY",
                  "KEYBOARD_LAYOUT", "DONKEY_KONG", "PYTHONPATH", "LS_COLORS", "EDITOR", "DOCKET_RUN", "DOCKET_PORT",
                  "PASSAGE", "TOKENIZER_PARALLELISM", "VIRTUAL_ENV", "HOSTNAME", "SSH_TTY"]


def test_secret_names_are_words_of_the_name():
    assert [n for n in SECRET_NAMES if not SECRET_NAME.search(n)] == []
    assert [n for n in INNOCENT_NAMES if SECRET_NAME.search(n)] == []


GHP = "ghp_" + "a1B2c3D4e5" * 4
SECRET_VALUES = [
    "sk-proj-Abcdefgh1234567890ijklmnOP", "sk-ant-api03-abcdefghijklmnop1234567890", GHP,
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "glpat-abcdefghij1234567890",
    "xoxb-1234567890-abcdefghij", "AKIAIOSFODNN7EXAMPLE", "ASIAABCDEFGHIJKLMNOP",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----",
    "postgres://app:hunter2@db.internal:5432/app", "https://x-access-token:" + GHP + "@github.com/o/r.git",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv", "Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdo",
    "sk_live_abcdefghijklmnop1234",
]
INNOCENT_VALUES = [
    "/usr/local/bin:/usr/bin:/bin", "en_US.UTF-8", "xterm-256color", "/home/someone/projects/docket",
    "0123456789abcdef0123456789abcdef01234567",  # a commit id
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  # a sha256 digest
    "550e8400-e29b-41d4-a716-446655440000", "test_processes_pure_ThisIsAVeryLongName2",
    "SomeVeryLongCamelCaseIdentifierName12345", "task-management-is-great-and-long-enough", "true", "",
    "http://localhost:8080/path", "risk-assessment-of-the-third-quarter", "di=01;34:ln=01;36:so=01;35",
]


def test_secret_values_are_recognised_by_their_shape():
    assert [v for v in SECRET_VALUES if not looks_secret_value(v)] == []
    assert [v for v in INNOCENT_VALUES if looks_secret_value(v)] == []


def test_scrub_removes_credentials_and_keeps_the_rest():
    environ = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "MY_API_TOKEN": "abc",
               "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "GITHUB_TOKEN": GHP,
               "INNOCENT": "sk-proj-Abcdefgh1234567890ijklmnOP", "EDITOR": "vi"}
    kept, removed = scrub_environment(environ)
    assert kept == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "EDITOR": "vi"}
    assert sorted(removed) == ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "INNOCENT", "MY_API_TOKEN"]


def test_scrub_keeps_what_is_allowed_by_name_or_glob():
    environ = {"GITHUB_TOKEN": GHP, "AWS_PROFILE": "dev", "AWS_REGION": "eu-west-1", "OPENAI_API_KEY": "sk-x",
               "PATH": "/bin"}
    kept, removed = scrub_environment(environ, allow=["GITHUB_TOKEN", "AWS_*"])
    assert kept == {"GITHUB_TOKEN": GHP, "AWS_PROFILE": "dev", "AWS_REGION": "eu-west-1", "PATH": "/bin"}
    assert removed == ["OPENAI_API_KEY"]


@given(st.dictionaries(st.sampled_from(SECRET_NAMES + INNOCENT_NAMES),
                       st.sampled_from(SECRET_VALUES + INNOCENT_VALUES)),
       st.lists(st.sampled_from(["PATH", "GH_*", "*_KEY", "AWS_?ROFILE", "[AG]*"]), max_size=3))
@settings(deadline=None)
def test_scrub_partitions_the_environment_and_always_keeps_what_is_allowed(environ, allow):
    kept, removed = scrub_environment(environ, allow)
    assert sorted([*kept, *removed]) == sorted(environ) and all(kept[n] == environ[n] for n in kept)
    for name in removed:
        assert not any(fnmatch.fnmatchcase(name, pattern) for pattern in allow)
        assert SECRET_NAME.search(name) or looks_secret_value(environ[name])
    for name in kept:
        assert any(fnmatch.fnmatchcase(name, p) for p in allow) or not (
            SECRET_NAME.search(name) or looks_secret_value(environ[name]))


@given(st.text(alphabet="AB_*?[]!^\\", max_size=8), st.text(alphabet="AB_^\\!", max_size=6))
@settings(max_examples=400, deadline=None)
def test_glob_matches_like_fnmatchcase(pattern, name):
    assert glob_matches(name, pattern) == fnmatch.fnmatchcase(name, pattern)


def test_glob_ranges():
    for pattern in ("[A-Z]*", "AWS_[!S]*", "[a-c]?"):
        for name in ("AWS_REGION", "AWS_SECRET", "b1", "d1", "Q"):
            assert glob_matches(name, pattern) == fnmatch.fnmatchcase(name, pattern), (name, pattern)
    assert not glob_matches("B", "[Z-A]")  # a reversed range matches nothing, and is no error


# --- redaction and tails --------------------------------------------------------------------------------------------

def test_redact_forms():
    assert redact("curl -H 'Authorization: Bearer abc.DEF-123_456'") == "curl -H 'Authorization: Bearer [redacted]'"
    assert redact("export OPENAI_API_KEY=abc123 PATH=/bin") == "export OPENAI_API_KEY=[redacted] PATH=/bin"
    assert redact('{"password": "hunter2", "user": "me"}') == '{"password": "[redacted]", "user": "me"}'
    assert redact(f"push to https://x:{GHP}@github.com") == "push to https://x:[redacted]@github.com"
    assert redact(f"token {GHP} used") == "token [redacted] used"
    assert redact("PASS: test_login\nDB_PASS=x") == "PASS: test_login\nDB_PASS=[redacted]"
    assert redact("commit 0123456789abcdef0123456789abcdef01234567 ok") == \
        "commit 0123456789abcdef0123456789abcdef01234567 ok"
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA\n-----END RSA PRIVATE KEY-----"
    assert redact(f"before\n{key}\nafter") == "before\n[redacted]\nafter"
    assert redact("IEow\nAAAA\n-----END RSA PRIVATE KEY-----\nafter") == "[redacted]\nafter"  # its start cut off


def test_tail_and_last_line_basics():
    log = b"one\r\ntwo\n\x1b[31mred\x1b[0m\n\n  \n"
    assert bounded_tail(log, max_lines=3) == "\x1b[31mred\x1b[0m\n\n  "  # control characters kept as text
    assert bounded_tail(log, max_lines=10) == "one\ntwo\n\x1b[31mred\x1b[0m\n\n  "
    assert bounded_tail(log, max_lines=10, max_chars=5) == "m\n\n  "  # cut at the front
    assert bounded_tail(b"") == "" and last_line(b"") == ""
    assert last_line(log) == "\x1b[31mred\x1b[0m"
    assert last_line(b"x" * 1000 + b"\n") == "x" * 200
    assert last_line(b"bad \xff byte") == "bad \ufffd byte"
    assert bounded_tail(b"API_KEY=abc\n") == "API_KEY=[redacted]"


def test_output_becomes_text_once_nul_escaped_and_the_rest_kept_for_renderers():
    """NUL never reaches an event (no event can hold it); the renderers escape everything else (safe_text)."""
    from docket.domain.containment.processes import output_text, safe_text

    assert output_text(b"a\x00b\xff\x1b[1m\r\nd") == "a\\x00b\ufffd\x1b[1m\nd"
    assert safe_text("lone \udcff surrogate\u2028\x1b") == "lone \\udcff surrogate\\u2028\\x1b"
    assert safe_text("plain text, ünïcödé ✓") == "plain text, ünïcödé ✓"
    assert output_text(b"TOKEN=ghp_" + b"a" * 36 + b" \x00") == "TOKEN=[redacted] \\x00"
    assert bounded_tail(b"end\x00") == "end\\x00" and last_line(b"end\x00\n") == "end\\x00"
