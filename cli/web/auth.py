"""Who may use `docket serve`: whoever holds its token.

The token is made once and kept in the docket folder (``serve.token``, 0600, never followed through a symlink); the
URL `docket serve` prints carries it. A browser that opens that URL is given it as a cookie (HttpOnly, SameSite
Strict) and sent on to the same page without it, so it stays out of history and Referer headers. Every other
request carries the cookie or an ``Authorization: Bearer`` header; anything else is 401 with nothing in the body
but the word. The one write the page makes (an answer) also needs the CSRF value the page carries, in a header no
other site's page can set without the server's consent (CORS), and an Origin of this server.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

__all__ = ["COOKIE", "CSRF_HEADER", "TOKEN_FILE", "csrf_value", "load_or_make_token", "token_matches"]

TOKEN_FILE = "serve.token"
COOKIE = "docket_token"
CSRF_HEADER = "x-docket-csrf"


def load_or_make_token(docket_dir: Path, *, new: bool = False) -> str:
    """The token kept in the docket folder; made (or, with new, made again) when there is none."""
    path = docket_dir / TOKEN_FILE
    if not new:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
        else:
            with os.fdopen(fd, "r", encoding="ascii") as f:
                if os.fstat(f.fileno()).st_mode & 0o077:
                    os.fchmod(f.fileno(), 0o600)
                token = f.read().strip()
            if len(token) >= 32 and token.isascii() and token.replace("-", "").replace("_", "").isalnum():
                return token
    token = secrets.token_urlsafe(32)
    fresh = path.with_name(f".{TOKEN_FILE}.{os.getpid()}")
    try:
        fresh.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(fresh, path)
    return token


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def csrf_value(token: str) -> str:
    """The value the page's one form sends back: derived from the token, so it is known only to who holds it."""
    return hmac.new(token.encode(), b"docket serve csrf", hashlib.sha256).hexdigest()
