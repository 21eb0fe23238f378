"""Answer only for our own names (DNS rebinding).

A page on ``evil.example`` can make its name resolve to 127.0.0.1 a moment after it loaded;
the browser then sends the page's requests to the loopback server as same-origin requests for
``evil.example``. Without tokens (the loopback mode, where every request is allowed) nothing
would stop them, and the CSRF rule, which compares ``Origin`` with this same ``Host``, would
pass them. So without tokens only the loopback names are answered — ``127.0.0.1``,
``localhost``, ``[::1]``, any port — and a deployment that serves other names lists them
(``jobtrail serve --allowed-host``, ``JOBTRAIL_ALLOWED_HOSTS``, ``create_app(allowed_hosts=)``).
With tokens and no list every name is answered: the tokens are the guard, and a browser never
adds a bearer token to a page's request by itself.

``HostGuard`` answers 400 to any other ``Host`` before a route, a token or a body is looked at.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

#: The names a loopback server answers for when nothing else is configured.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
ENV = "JOBTRAIL_ALLOWED_HOSTS"
REFUSED = (
    "this server does not answer for that Host name (a guard against DNS rebinding); "
    "list the names it serves with --allowed-host or JOBTRAIL_ALLOWED_HOSTS"
)


def host_name(header: str | None) -> str | None:
    """The name of a ``Host`` header without its port, lower-case, IPv6 without brackets;
    ``None`` for a missing or malformed header."""
    if not header:
        return None
    text = header.strip().lower()
    if text.startswith("["):
        name, close, rest = text[1:].partition("]")
        if not close or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
    else:
        name, colon, port = text.rpartition(":")
        if not colon:
            name = text
        elif not port.isdigit() or ":" in name:
            return None
    name = name.rstrip(".")
    return name or None


def allowed_hosts(
    configured: str | Sequence[str] | None, *, has_tokens: bool
) -> frozenset[str] | None:
    """The names to answer (``None``: any). ``configured`` is the setting (a comma-separated
    string or names; ``None`` reads ``JOBTRAIL_ALLOWED_HOSTS``); ``*`` in it means any name."""
    if configured is None:
        configured = os.environ.get(ENV) or None
    if isinstance(configured, str):
        configured = configured.split(",")
    names = [n.strip() for n in configured or () if n.strip()]
    if "*" in names:
        return None
    if names:
        return frozenset(_normal(n) for n in names)
    return None if has_tokens else frozenset(LOOPBACK_HOSTS)


def _normal(name: str) -> str:
    found = host_name(name) if not name.count(":") > 1 else name.strip("[]").lower()
    if not found:
        raise ValueError(f"allowed host {name[:100]!r} is not a host name")
    return found


class HostGuard:
    """Answer 400 to a request whose ``Host`` is not in ``hosts`` (``None``: let all pass)."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str] | None) -> None:
        self.app = app
        self.hosts = None if hosts is None else frozenset(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.hosts is not None and scope["type"] == "http":
            if host_name(Headers(scope=scope).get("host")) not in self.hosts:
                body = json.dumps({"error": REFUSED}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
