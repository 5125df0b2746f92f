"""Processes as data: who a process is, whether it still lives, and what of its world it may see.

Pure rules only: the adapter (adapters/world/processes/lifecycle.py) reads /proc and
psutil and hands the facts in. Liveness is three-valued because docket must
never take "I could not tell" for "it is gone": unknown never reclaims.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping
from typing import Literal

from .process_identity import ProcessIdentity

__all__ = [
    "SECRET_NAME",
    "WITHHELD_UNLESS_NAMED",
    "Liveness",
    "ProcessIdentity",
    "bounded_tail",
    "glob_matches",
    "last_line",
    "liveness_of",
    "looks_secret_value",
    "output_text",
    "redact",
    "redact_values",
    "safe_text",
    "scrub_environment",
    "secret_values",
]

Liveness = Literal["alive", "dead", "unknown"]

REDACTED = "[redacted]"
_HIDDEN = "[hidden]"  # the marker for a secret value that is part of REDACTED itself ("[redacte", "redacted")


def liveness_of(identity: ProcessIdentity, *, host: str, boot_id: str, start_time_now: str | None,
                exists: bool | None) -> Liveness:
    """Whether identity still runs, given what this host sees now at its pid.

    Another host cannot be looked at: unknown, never dead. Another boot ended
    every process of the last one. A pid now held by another start time was
    reused: the process we knew is gone.
    """
    if identity.host != host:
        return "unknown"
    if identity.boot_id != boot_id:
        return "dead"
    if exists is None:
        return "unknown"
    if not exists:
        return "dead"
    if start_time_now is None:
        return "unknown"
    return "alive" if start_time_now == identity.start_time else "dead"


# --- secrets ------------------------------------------------------------------------------------------------------

# Whole '_'-separated words of a variable name, so PATH, MONKEY and KEYBOARD stay while API_KEY, DB_PASS go.
_SECRET_WORDS = (
    "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASS", "PASSPHRASE",
    "KEY", "KEYS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY", "AUTHTOKEN", "ACCESSTOKEN",
    "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "SESSION", "COOKIE", "COOKIES", "DSN",
)
# Prefixes of providers whose every variable is best kept from an agent.
_SECRET_PREFIXES = (
    "AWS", "AZURE", "GOOGLE", "GCP", "GCLOUD", "CLOUDSDK", "OPENAI", "ANTHROPIC", "GH", "GEMINI", "MISTRAL",
    "COHERE", "GROQ", "DEEPSEEK", "OPENROUTER", "HF", "HUGGING_FACE", "HUGGINGFACE", "VAULT", "DIGITALOCEAN",
    "STRIPE", "TWILIO", "SLACK", "SENTRY",
)
SECRET_NAME = re.compile(
    r"(?:^|_)(?:" + "|".join(_SECRET_WORDS) + r")(?:_|$)"
    r"|^(?:" + "|".join(_SECRET_PREFIXES) + r")_",
    re.IGNORECASE,
)

_NOT_ALNUM_BEFORE = r"(?<![A-Za-z0-9])"
_KNOWN_TOKENS = (
    r"sk-(?:[A-Za-z0-9]+-){0,3}[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic (sk-ant-api03-...), DeepSeek...
    r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab
    r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"(?:AKIA|ASIA)[A-Z0-9]{16}",  # AWS access key ids
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"npm_[A-Za-z0-9]{36}",
    r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",  # JWT
)
_KNOWN_TOKEN = re.compile(_NOT_ALNUM_BEFORE + "(?:" + "|".join(_KNOWN_TOKENS) + ")")
# A private key block; also its end alone, when a tail cut its beginning off.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)"
    r"|\A(?:(?!-----BEGIN ).)*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    re.DOTALL,
)
_URL_PASSWORD = re.compile(r"(?P<keep>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+(?=@)")
_BEARER = re.compile(r"(?P<keep>\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_NAME_VALUE = re.compile(
    r"""(?P<name>(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*)(?P<sep>["']?[ \t]*[=:][ \t]*["']?)(?P<value>[^\s"',;&]+)"""
)
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+=-]{32,}")
# An AWS secret access key: exactly 40 characters of base64's alphabet, standing alone.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT = re.compile(r"aws|(?:AKIA|ASIA)[A-Z0-9]{16}", re.IGNORECASE)
# "password is hunter2", "the passphrase was x": said in words, not as name=value.
_PASSWORD_SAID = re.compile(r"(?P<keep>\b(?:password|passwd|passphrase)\s+(?:is|was)\s+)(?P<value>[^\s\"',;]+)",
                            re.IGNORECASE)
# A value shorter than this is not redacted by value: "1", "true" or "admin" would blank out ordinary output, and so
# short a secret is guessable anyway. Values are still caught by their shape when they have one.
MIN_SECRET_CHARS = 8


def _looks_random(run: str) -> bool:
    """A long run mixing upper case, lower case and digits that switches between them like random text does.

    Conservative: hex (commit ids, digests) and UUIDs have no upper case; words
    and CamelCase identifiers switch classes far less often than random base64.
    """
    if not (any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run)):
        return False
    classes = ["u" if c.isupper() else "l" if c.islower() else "d" for c in run if c.isalnum()]
    switches = sum(a != b for a, b in zip(classes, classes[1:]))
    return switches >= 0.4 * (len(classes) - 1)


def _random_runs(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _TOKEN_RUN.finditer(text) if _looks_random(m.group())]


def _aws_secret_keys(text: str, aws: bool | None = None) -> list[tuple[int, int]]:
    """Bare 40-character base64 runs that an AWS secret access key could be: mixed case with a digit or / or +,
    and either the text speaks of AWS (aws: as the caller saw it before redacting) or the run switches between
    character classes as random text does."""
    spans = []
    for m in _AWS_SECRET.finditer(text):
        run = m.group()
        if not (any(c.isupper() for c in run) and any(c.islower() for c in run)
                and any(c.isdigit() or c in "/+" for c in run)):
            continue
        if aws is None:
            aws = bool(_AWS_CONTEXT.search(text))
        if aws or _looks_random(run.replace("/", "").replace("+", "")):
            spans.append(m.span())
    return spans


def looks_secret_value(value: str) -> bool:
    """Whether a value holds something shaped like a credential (a known token format, a key, a URL password)."""
    return bool(_KNOWN_TOKEN.search(value) or _PRIVATE_KEY.search(value) or _URL_PASSWORD.search(value)
                or _random_runs(value) or _aws_secret_keys(value))


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values docket redacts by value: every value of environ that scrub_environment would withhold from an
    agent (a credential-looking name or value), whether it was withheld or let through by env_allow, since
    env_allow lets a value reach the agent, never the record. Values shorter than MIN_SECRET_CHARS are left to
    the shape rules; longest first, so a value containing another is replaced whole."""
    found = {value.strip() for name, value in environ.items()
             if SECRET_NAME.search(name) or looks_secret_value(value)}
    return tuple(sorted((v for v in found if len(v) >= MIN_SECRET_CHARS), key=lambda v: (-len(v), v)))


def glob_matches(name: str, pattern: str) -> bool:
    """fnmatch.fnmatchcase's shell globs (*, ?, [seq], [!seq]), written here to keep the domain free of os."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and (end := pattern.find("]", i + 1 if pattern[i:i + 1] in ("!", "]") else i)) != -1:
            body = re.sub(r"([\\&~|\[^])", r"\\\1", pattern[i:end])
            i = end + 1
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
        else:
            out.append(re.escape(c))
    try:
        return re.fullmatch("".join(out), name, re.DOTALL) is not None
    except re.error:  # a reversed range ([z-a]): fnmatch drops it, we let the whole pattern match nothing
        return False


# Variables that name a door out of the sandbox rather than a secret: a socket or server that acts with the user's
# authority (ssh-agent signs with the user's keys, gpg-agent decrypts, D-Bus reaches the keyring and the desktop,
# docker's socket is root, a display takes keystrokes, tmux and an editor's IPC type into the user's terminals) or
# where a database and its password file are. Landlock does not govern connect() on a named unix socket, so the
# name is withheld: a launch gets one only when its env_allow names it exactly (a glob such as "*" or "SSH_*" is
# not asking for the user's agent).
WITHHELD_UNLESS_NAMED = frozenset({
    "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "GIT_ASKPASS", "GPG_AGENT_INFO",
    "GNUPGHOME", "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "DOCKER_HOST", "DOCKER_CONTEXT",
    "DOCKER_CONFIG", "DOCKER_CERT_PATH", "CONTAINER_HOST", "CONTAINERS_CONF", "KUBECONFIG", "XDG_RUNTIME_DIR",
    "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "PULSE_SERVER", "NOTIFY_SOCKET", "TMUX", "TMUX_PANE", "STY",
    "KITTY_LISTEN_ON", "VSCODE_IPC_HOOK", "VSCODE_IPC_HOOK_CLI", "VSCODE_GIT_IPC_HANDLE", "VSCODE_GIT_ASKPASS_MAIN",
    "VSCODE_GIT_ASKPASS_NODE", "VSCODE_GIT_ASKPASS_EXTRA_ARGS", "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE",
    "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT",
    "MYSQL_UNIX_PORT", "MYSQL_HOST", "MYSQL_PWD", "REDIS_URL", "DATABASE_URL",
})


def scrub_environment(environ: Mapping[str, str], allow: Collection[str] = ()) -> tuple[dict[str, str], list[str]]:
    """(kept, removed names): a credential-looking name or value is removed unless allow names or globs it; a
    name of WITHHELD_UNLESS_NAMED (a socket, an agent, a database) is removed unless allow names it exactly."""
    kept: dict[str, str] = {}
    removed: list[str] = []
    for name, value in environ.items():
        if name in WITHHELD_UNLESS_NAMED:
            allowed = name in allow
        else:
            allowed = any(name == pattern or glob_matches(name, pattern) for pattern in allow)
        if allowed or not (name in WITHHELD_UNLESS_NAMED or SECRET_NAME.search(name) or looks_secret_value(value)):
            kept[name] = value
        else:
            removed.append(name)
    return kept, removed


_RESULT_LABELS = {"PASS", "XPASS"}  # "PASS: test_name" in automake and TAP output is no password


def _redact_name_value(match: re.Match[str]) -> str:
    if not SECRET_NAME.search(match["name"]) or (match["name"] in _RESULT_LABELS and ":" in match["sep"]):
        return match.group()
    return match["name"] + match["sep"] + REDACTED


def redact_values(text: str, secrets: Collection[str]) -> str:
    """text with every one of secrets (values known to be secret, longest first) replaced by "[redacted]"."""
    for value in secrets:
        if value and value in text:
            text = text.replace(value, _HIDDEN if value in REDACTED else REDACTED)
    return text


def redact(text: str, secrets: Collection[str] = ()) -> str:
    """text with every one of secrets (redact_values) and every secret-looking part replaced by "[redacted]".
    The known values go first: a shape rule cutting into one would leave the rest of it."""
    text = redact_values(text, secrets)
    aws = bool(_AWS_CONTEXT.search(text))  # before the access key id that says so is redacted
    text = _PRIVATE_KEY.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: m["keep"] + REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: m["keep"] + REDACTED, text)
    text = _KNOWN_TOKEN.sub(REDACTED, text)
    text = _NAME_VALUE.sub(_redact_name_value, text)
    text = _PASSWORD_SAID.sub(lambda m: m["keep"] + REDACTED, text)
    for start, end in reversed(_aws_secret_keys(text, aws)):
        text = text[:start] + REDACTED + text[end:]
    for start, end in reversed(_random_runs(text)):
        text = text[:start] + REDACTED + text[end:]
    return text


# --- log tails ----------------------------------------------------------------------------------------------------

_MARGIN = 8192  # chars read before what is kept, so a secret cut by the window is cut away again, not half shown
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, bidi and invisible marks, lone surrogates
_KEPT_CONTROLS = frozenset("\n\t")


def _escaped_char(char: str) -> str:
    if char in _KEPT_CONTROLS or unicodedata.category(char) not in _UNSAFE_CATEGORIES:
        return char
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def safe_text(text: str) -> str:
    """text with every control, bidi or invisible character and every lone surrogate shown as an escape (\\x00,
    \\x1b, \\u202e, \\udcff), newlines and tabs kept: what a process printed is data, never a terminal's
    command, and NUL or a surrogate would make an event unrecordable (exit 70 on every resume)."""
    if text.isprintable():  # the fast path: printable text has none of them
        return text
    return "".join(map(_escaped_char, text))


def output_text(data: bytes, secrets: Collection[str] = ()) -> str:
    """The one place a process's output bytes (an agent's, a check's, a hook's) become text for an event or a
    report: decoded as UTF-8 (invalid bytes become U+FFFD), CRLF read as a newline, redacted (shapes and the known
    secret values, on the text as printed), and NUL, which no event can hold, shown as ``\\x00`` (else one NUL
    byte made the run's every resume fail). Other characters are kept as printed: --json carries them exactly, and
    every renderer escapes them (safe_text, or the CLI's own)."""
    return redact(data.decode("utf-8", errors="replace").replace("\r\n", "\n"), secrets).replace("\x00", "\\x00")


def _decoded_end(data: bytes, chars: int, secrets: Collection[str]) -> str:
    window = data[-(4 * chars + _MARGIN):]  # a UTF-8 character is at most 4 bytes
    return output_text(window, secrets)


def _lines(text: str) -> list[str]:
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    return lines


def bounded_tail(data: bytes, *, max_lines: int = 20, max_chars: int = 2000, secrets: Collection[str] = ()) -> str:
    """The end of a log, decoded, redacted (shapes and secrets, the known values) and made safe (output_text): at
    most max_lines lines and max_chars characters, cut at the front."""
    if max_lines <= 0 or max_chars <= 0:
        return ""
    lines = _lines(_decoded_end(data, max_chars, secrets))[-max_lines:]
    return "\n".join(lines)[-max_chars:]


LAST_LINE_CHARS = 200


def last_line(data: bytes, secrets: Collection[str] = ()) -> str:
    """The log's last non-blank line, decoded and redacted, at most 200 characters (its end). A carriage return
    ends a line, as on a terminal; its characters are kept as printed (--json carries them exactly, every renderer
    escapes them) but NUL, which no event can hold, shown as ``\\x00``."""
    window = data[-(4 * LAST_LINE_CHARS * 40 + _MARGIN):]
    text = redact(window.decode("utf-8", errors="replace"), secrets).replace("\x00", "\\x00")
    for line in reversed(text.splitlines()):
        if line.strip():
            return line[-LAST_LINE_CHARS:]
    return ""
