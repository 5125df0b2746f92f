"""A PostgreSQL ledger's URL: read into the library's settings, and shown without its password.

The standard library only: every command given DOCKET_DATABASE_URL checks it before anything heavy is imported.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["postgres_env", "redacted"]


def postgres_env(url: str, *, lock_timeout: int) -> dict[str, str]:
    """The library's PostgreSQL settings from a ``postgresql://user:password@host:port/dbname`` URL.

    ``?host=/a/folder`` names a Unix socket's folder; ``?schema=name`` a schema other than ``public``. A password
    not in the URL is PGPASSWORD's, else empty (a trusted or peer login).
    """
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise ValueError("the URL holds a control character")
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL (postgresql://...): {redacted(url)}")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    dbname = unquote(parts.path.lstrip("/")) or query.get("dbname", "")
    if not dbname:
        raise ValueError(f"the URL names no database (postgresql://host/DBNAME): {redacted(url)}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the URL's port is not a port number: {redacted(url)}") from None
    schema = query.get("schema", "")
    if schema and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise ValueError(f"the URL's schema must be a plain name (letters, digits, _): {redacted(url)}")
    return {
        "POSTGRES_DBNAME": dbname,
        "POSTGRES_HOST": query.get("host") or parts.hostname or "localhost",
        "POSTGRES_PORT": str(port or query.get("port") or 5432),
        "POSTGRES_USER": unquote(parts.username or "") or os.environ.get("PGUSER", "") or "postgres",
        "POSTGRES_PASSWORD": unquote(parts.password or "") or os.environ.get("PGPASSWORD", ""),
        "POSTGRES_SCHEMA": schema,
        "POSTGRES_LOCK_TIMEOUT": str(lock_timeout),
        "POSTGRES_CONNECT_TIMEOUT": query.get("connect_timeout", "10"),
        "POSTGRES_POOL_SIZE": "1",
        "POSTGRES_MAX_OVERFLOW": "4",  # a decision's connection, a reader's, the watch's, a thread's turn
        "POSTGRES_PRE_PING": "y",  # a pooled connection the server dropped (a restart) is replaced, not used
        "ORIGINATOR_ID_TYPE": "text",
    }


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
