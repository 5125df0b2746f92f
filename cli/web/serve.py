"""docket serve: the runs, one run, and the inbox as a local web page, live, behind a token (cli/web/)."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

from ..console.context import Context
from ..console.parsing import command
from ...domain.kernel.codes import Code

__all__ = ["register"]

DEFAULT_PORT = 8470
LOCAL = "127.0.0.1"


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "serve", serve, common,
                "serve a live web view of the runs, their tasks, checks, merge queue, receipts and the inbox "
                "(where the local user answers), read from the views and the ledger; every request needs the token "
                "in the URL it prints (kept in the docket folder, 0600)",
                "docket serve --port 8470")
    p.add_argument("--port", metavar="N", type=int, default=DEFAULT_PORT,
                   help=f"the port to listen on (default {DEFAULT_PORT}; 0: any free port, named in the URL)")
    p.add_argument("--bind", metavar="ADDR", default=LOCAL,
                   help=f"the address to listen on (default {LOCAL}: this machine only); the token is needed "
                        "whatever it is")
    p.add_argument("--key", metavar="PUB", type=Path,
                   help="the public key a receipt's verify checks it with (default: the .pub beside the private "
                        "key the run exports with)")
    p.add_argument("--new-token", action="store_true", help="make a new token: URLs printed before stop working")


def _listening(address: str, port: int) -> socket.socket:
    from ...domain.kernel.errors import BadInput, Refused

    if not 0 <= port <= 65535:
        raise BadInput(Code.BAD_PORT, f"a port is 0 to 65535, not {port}")
    try:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except socket.gaierror as e:
        raise BadInput(Code.BAD_ADDRESS, f"cannot listen on {address!r}: {e.strerror}") from None
    except (TypeError, UnicodeError, ValueError):  # a name no resolver can encode (idna), a NUL in it
        raise BadInput(Code.BAD_ADDRESS, f"cannot listen on {address!r}: not an address or host name") from None
    except OSError as e:
        raise Refused("address-in-use" if e.errno == 98 else "cannot-listen",
                      f"cannot listen on {address} port {port}: {e.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def _loopback(host: str) -> bool:
    """Whether the address listened on is this machine only (127.0.0.0/8, ::1, ::ffff:127.x)."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def _require_public_key(path: Path) -> None:
    """--key names a public key a receipt is verified with: one that is not there or not a key is refused now
    (key-not-found, bad-key), not at the first verify a person clicks."""
    from ...adapters.world.ledger.signing import load_verifier

    load_verifier(path)


def serve(ctx: Context) -> int:
    import uvicorn

    from ..console.output import warn
    from .app import build_app
    from .auth import load_or_make_token

    a = ctx.args
    ctx.require_ledger_file()
    if a.key is not None:
        _require_public_key(a.key)
    sock = _listening(a.bind, a.port)
    token = load_or_make_token(ctx.paths.ledger.parent, new=a.new_token)
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    if not _loopback(host):
        warn("serve-exposed", f"listening on {a.bind}: anyone who can reach it and has the token sees the runs "
                              "and may answer as you")
    print(f"http://{shown_host}:{port}/?token={token}", flush=True)
    if sys.stderr.isatty():  # a hint for a person; a pipe or a log gets the URL alone (stderr is errors, warnings)
        print("docket serve: open the URL above; Ctrl-C stops", file=sys.stderr, flush=True)
    app = build_app(getattr(a, "ledger", None), token, public_key=a.key)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    server.run(sockets=[sock])
    return 0
