"""Redaction by value (the secrets docket withholds or lets through env_allow), the AWS and password shapes, and
the config warning for env_allow = ["*"]."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from docket.domain.config import Config
from docket.domain.reports.junit import parse_junit
from docket.domain.containment.processes import (
    MIN_SECRET_CHARS,
    bounded_tail,
    last_line,
    looks_secret_value,
    redact,
    redact_values,
    scrub_environment,
    secret_values,
)

ENVIRON = {
    "DEPLOY_TOKEN": "plain-words-but-secret",  # secret by its name, not by its shape
    "OPAQUE": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",  # secret by its shape, not by its name
    "DB_PASS": "short",  # too short to redact by value
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/someone",
}
AWS_SECRET = "q8Zr3Kt0bV+y7LmW2pXc9NfA1sDe4Gh6Jk5Tu/Ro"  # 40 characters of base64, random-looking


def test_secret_values_are_the_withheld_and_the_allowed_values_of_credential_variables():
    values = secret_values(ENVIRON)
    assert set(values) == {"plain-words-but-secret", ENVIRON["OPAQUE"]}
    assert list(values) == sorted(values, key=len, reverse=True)  # longest first
    _, removed = scrub_environment(ENVIRON)
    assert {ENVIRON[name] for name in removed if len(ENVIRON[name]) >= MIN_SECRET_CHARS} == set(values)
    # env_allow lets a value reach the agent, never the record: the same values whatever is allowed
    kept, _ = scrub_environment(ENVIRON, allow=["*"])
    assert kept == ENVIRON and secret_values(ENVIRON) == values


def test_known_values_are_redacted_wherever_output_is_kept():
    secrets = secret_values(ENVIRON)
    out = b"connecting with plain-words-but-secret to /usr/bin\nusing sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345\n"
    tail = bounded_tail(out, secrets=secrets)
    assert "plain-words-but-secret" not in tail and "sk-ant" not in tail and "/usr/bin" in tail
    assert last_line(b"using plain-words-but-secret here\n", secrets) == "using [redacted] here"
    assert redact_values("a plain-words-but-secret b", secrets) == "a [redacted] b"
    assert bounded_tail(out).count("plain-words-but-secret") == 1  # without the values, the shape rules alone


def test_a_value_containing_another_is_replaced_whole():
    assert redact_values("x abcdefgh-ijklmnop y", ("abcdefgh-ijklmnop", "abcdefgh")) == "x [redacted] y"
    assert redact_values("x abcdefgh-ijklmnop y", secret_values({"A_KEY": "abcdefgh", "B_KEY": "abcdefgh-ijklmnop"})) \
        == "x [redacted] y"


@given(before=st.text(max_size=200), after=st.text(max_size=200),
       secret=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=MIN_SECRET_CHARS,
                      max_size=60))
def test_a_known_value_never_survives_a_tail(before, secret, after):
    tail = bounded_tail(f"{before}{secret}{after}".encode(), max_chars=4000, max_lines=1000,
                        secrets=secret_values({"MY_SECRET": secret}))
    assert secret.strip() not in tail


def test_password_said_in_words_and_as_name_value():
    for text in ("the password is hunter2", "Password was hunter2.", "passwd is hunter2", "password=hunter2",
                 "password: hunter2", "PASSWORD = 'hunter2'", "aws_secret_access_key = hunter2",
                 "AWS_SECRET_ACCESS_KEY: hunter2"):
        assert "hunter2" not in redact(text), text
    assert redact("the password is required") == "the password is [redacted]"  # the price of the rule


def test_aws_secret_access_keys():
    assert redact(AWS_SECRET) == "[redacted]"
    assert redact(f"key {AWS_SECRET} done") == "key [redacted] done"
    example = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example: too regular to look random
    assert redact(f"aws secret {example}") == "aws secret [redacted]"  # but in an AWS context it goes
    assert redact(f"AKIAIOSFODNN7EXAMPLE {example}") == "[redacted] [redacted]"
    assert looks_secret_value(AWS_SECRET)
    for kept in ("0123456789abcdef0123456789abcdef01234567",  # a commit id
                 "aws s3 cp 0123456789abcdef0123456789abcdef01234567",
                 "/usr/lib/python3/dist-packages/something/else.py"):
        assert redact(kept) == kept


def test_junit_messages_and_ids_are_redacted_by_value():
    report = parse_junit(b'<testsuite><testcase classname="t" name="plain-words-but-secret">'
                         b'<failure message="got plain-words-but-secret"/></testcase></testsuite>',
                         secret_values(ENVIRON))
    (failure,) = report.failing
    assert "plain-words-but-secret" not in failure.id + failure.message


def test_env_allow_everything_is_a_warning():
    config = Config.model_validate({"agents": {"a": {"command": ["x", "{prompt}"], "env_allow": ["*"]},
                                               "b": {"command": ["x", "{prompt}"], "env_allow": ["OPENAI_*"]}},
                                    "checks": {"t": {"command": ["true"], "env_allow": ["*"]}}})
    assert [(code, message.split()[0]) for code, message in config.warnings()] == [
        ("env-allow-everything", "[agents.a]"), ("env-allow-everything", "[checks.t]")]
    assert Config().warnings() == []


def test_a_secret_value_that_is_part_of_the_marker_does_not_survive_in_it():
    """Found by the property above: the secret "[redacte" replaced by "[redacted]" was still in the tail."""
    for secret in ("[redacte", "redacted", "[redacted]", "edacted]"):
        tail = bounded_tail(f"x {secret} y".encode(), max_chars=4000, max_lines=1000,
                            secrets=secret_values({"MY_SECRET": secret}))
        assert secret not in tail, (secret, tail)
