"""Cross-site request forgery: the dashboard changes something only at its own origin's request.

The dashboard signs a person in with a cookie, which a browser attaches by itself to requests
that other pages start (a form that submits itself, a ``307`` that forwards a POST). A
state-changing request — any method but GET/HEAD/OPTIONS, outside ``/api/`` and ``/webhooks/``
(those take bearer tokens and signatures, never the cookie) — is accepted only when:

1. ``Sec-Fetch-Site``, if sent, is ``same-origin`` (``same-site`` is another port or subdomain,
   ``none`` a typed URL or bookmark: neither may change anything);
2. ``Origin``, if sent, is exactly this request's ``scheme://host[:port]``; ``null`` (what a
   browser sends after a cross-origin redirect or from a sandboxed page) is refused;
3. with neither header — no browser of the last years sends a POST without one — the request
   carries an ``Authorization: Bearer`` header, which no browser adds by itself; the dashboard
   then authenticates that header and never the cookie. ``/login`` without either header is
   accepted only when it carries no session cookie, so it cannot replace a person's session.

``refusal`` states the rule as a pure function; ``OriginGuard`` applies it to a whole ASGI app
before any route runs or any body is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..hosts import send_error

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
EXEMPT = ("/api/", "/webhooks/")
DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_key(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def own_origin(scheme: str, host: str | None) -> tuple[str, str, int] | None:
    """This request's origin from its scheme and ``Host`` header (``None`` without a host)."""
    if not host or any(c in host for c in "/?#@\\"):
        return None
    return _origin_key(f"{scheme}://{host}")


def refusal(
    method: str,
    path: str,
    scheme: str,
    headers: Mapping[str, str],
    *,
    session_cookie: str | None = None,
) -> str | None:
    """Why this request may not change anything here, or ``None`` when it may.

    ``headers`` are the request's (lower-case names); ``session_cookie`` is the name of the
    cookie ``/login`` sets, if the application has one."""
    if method.upper() in SAFE_METHODS or path.startswith(EXEMPT):
        return None
    site = headers.get("sec-fetch-site")
    origin = headers.get("origin")
    if site is not None and site.strip().lower() != "same-origin":
        return f"refused: a {site.strip()[:20]!r} request may not change anything here (CSRF)"
    if origin is not None:
        mine = own_origin(scheme, headers.get("host"))
        if origin.strip().lower() == "null" or mine is None or _origin_key(origin) != mine:
            return "refused: this request comes from another origin (CSRF)"
        return None
    if site is not None:
        return None  # the browser says same-origin
    if headers.get("authorization", "").split(" ", 1)[0].lower() == "bearer":
        return None  # no browser adds this by itself; the route authenticates it, not a cookie
    if path == "/login" and not _has_cookie(headers.get("cookie", ""), session_cookie):
        return None  # a program signing in: it has no session anyone could replace
    return (
        "refused: a request that changes something must come from the dashboard's own pages "
        "(Origin / Sec-Fetch-Site) or carry an Authorization: Bearer header (CSRF)"
    )


def _has_cookie(header: str, name: str | None) -> bool:
    if name is None:
        return False
    return any(part.strip().split("=", 1)[0] == name for part in header.split(";"))


class OriginGuard:
    """Answer 403 ``{"error": ...}`` to every request ``refusal`` refuses, before ``app``."""

    def __init__(self, app: ASGIApp, session_cookie: str | None = None) -> None:
        self.app = app
        self.session_cookie = session_cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = refusal(
                scope["method"],
                scope["path"],
                scope.get("scheme", "http"),
                Headers(scope=scope),
                session_cookie=self.session_cookie,
            )
            if why is not None:
                await send_error(send, 403, why)
                return
        await self.app(scope, receive, send)
