"""Request bodies bounded while they are read (chunked ones too), before any route or token
looks at them.

``BodyLimit`` is a pure ASGI middleware: it answers 413 at once when ``Content-Length`` is over
the limit, and otherwise counts the bytes the application pulls through ``receive``; the moment
the count passes the limit it stops handing out body, throws away whatever the application
answers to the cut-off body and answers 413 itself. Nothing here keeps a body: the only bytes in
memory are the ones the application already asked for (at most the limit plus one chunk), so a
chunked body of any size costs a bounded amount of memory whether or not it carries a token.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("jobtrail.web")


class BodyTooLarge(Exception):
    """Raised from ``receive`` once the body passed its limit; ``BodyLimit`` answers 413."""


def declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


def too_large(limit: int) -> tuple[Message, Message]:
    """The 413 answer, as the two ASGI messages that send it."""
    body = json.dumps({"error": f"request body over the {limit}-byte limit"}).encode()
    start = {
        "type": "http.response.start",
        "status": 413,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class BodyLimit:
    """Wrap ``app`` so no request body read through it passes ``limit_for(path)`` bytes.

    ``on_refused(path)`` is called once per refused request (the server counts webhook
    deliveries refused for size there)."""

    def __init__(
        self,
        app: ASGIApp,
        limit_for: Callable[[str], int],
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.app = app
        self.limit_for = limit_for
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        limit = self.limit_for(path)
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(path, limit, send)
            return
        seen = 0
        over = False
        started = False

        async def counted() -> Message:
            nonlocal seen, over
            if over:
                raise BodyTooLarge
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    over = True
                    raise BodyTooLarge
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if over and not started:
                return  # the app's answer to a body it never got whole: the 413 replaces it
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            # A framework may wrap BodyTooLarge (FastAPI turns body errors into a 400): once
            # the limit is passed, whatever came of it is answered with the 413 below.
            if not over or started:
                raise
        if over and not started:
            await self._refuse(path, limit, send)

    async def _refuse(self, path: str, limit: int, send: Send) -> None:
        log.info("refused a request body over %d bytes for %r", limit, path[:200])
        if self.on_refused is not None:
            self.on_refused(path)
        for message in too_large(limit):
            await send(message)
