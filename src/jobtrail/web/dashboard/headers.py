"""Security headers on every answer (CSP, frames, nosniff, referrer), as a pure ASGI middleware.

Every response gets ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``,
``Referrer-Policy: same-origin`` and a ``Content-Security-Policy`` that allows only this
origin's own files: the dashboard's templates carry no inline script, style or event handler
(the styles are ``/static/dashboard.css``, htmx is vendored), so a name or error text that
slipped through escaping still could not run. Answers other than ``/static/`` files get
``Cache-Control: no-store`` (pages and API answers carry tasks, payloads and errors; no shared
cache or back button should keep them). FastAPI's ``/docs`` and ``/redoc`` load their viewers
from a CDN with an inline bootstrap script and get a looser policy of their own; they show only
the public OpenAPI document.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

POLICY = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "font-src 'self' https://fonts.gstatic.com; img-src 'self' data: https:; "
    "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
DOCS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})
ALWAYS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)


class SecurityHeaders:
    """Add the headers above to every HTTP answer of ``app`` (without overriding a
    ``Cache-Control`` the route chose)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        policy = (DOCS_POLICY if path in DOCS else POLICY).encode()
        cacheable = path.startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in {name for name, _ in ALWAYS}
                    and k.lower() != b"content-security-policy"
                ]
                headers += [*ALWAYS, (b"content-security-policy", policy)]
                if not cacheable and not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
