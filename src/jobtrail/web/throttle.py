"""Slow down token guessing: failed sign-ins and failed tokens, per client address.

A *guess* is a request that offers a credential — an ``Authorization`` header, the session
cookie, or a POST to ``/login`` — and is answered 401 (webhook deliveries are not: their 401 is
a signature that does not match the body). Each address may make ``failures``
guesses per ``window`` seconds (a burst of ``failures``, then one per ``window / failures``
seconds: by default 10 at once, then one every 6 s). Past that, every request from that address
that offers a credential is answered 429 with ``Retry-After`` *without being checked*, so a
right guess looks exactly like a wrong one until the wait is over. Requests offering no
credential pass untouched, and other addresses are not affected: an attacker slows only itself.

The state is one float per address (a "theoretical arrival time", as in GCRA) in an LRU map of
at most ``max_clients`` addresses, so memory is bounded whatever the number of addresses.

The address is the peer's: ``jobtrail serve`` believes ``X-Forwarded-For`` only from the
proxies named by ``--forwarded-allow-ips`` (``web/serving.py``; uvicorn's own default believed
it from 127.0.0.1, so any local process could name a new address per guess and never be
slowed). Behind a reverse proxy, name it there, so the address is the client's, not the
proxy's (else all clients share the proxy's one budget).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..model.oneline import one_line

log = logging.getLogger("jobtrail.web")


class Throttle:
    """Per-key budget of failures: ``allowed(key, now)`` and ``failed(key, now)``."""

    def __init__(self, failures: int = 10, window: float = 60.0, max_clients: int = 10_000):
        if failures < 1 or window <= 0 or max_clients < 1:
            raise ValueError("a throttle needs failures >= 1, window > 0 and max_clients >= 1")
        self.window = window
        self.interval = window / failures
        self.max_clients = max_clients
        self._due: OrderedDict[str, float] = OrderedDict()

    def wait(self, key: str, now: float) -> float:
        """Seconds ``key`` must wait before it may try again (0: it may try now)."""
        due = self._due.get(key)
        if due is None:
            return 0.0
        return max(0.0, due - now - (self.window - self.interval))

    def failed(self, key: str, now: float) -> None:
        due = max(self._due.pop(key, now), now) + self.interval
        self._due[key] = due  # most recently failed last: the first is the one to forget
        while len(self._due) > self.max_clients:
            self._due.popitem(last=False)

    def __len__(self) -> int:
        return len(self._due)


def _offers_credential(scope: Scope, cookie: str | None) -> bool:
    if str(scope.get("path", "")).startswith("/webhooks/"):
        return False  # a 401 there is a bad signature over the body, not a guessed token
    headers = Headers(scope=scope)
    if "authorization" in headers:
        return True
    if scope["method"] == "POST" and scope["path"] == "/login":
        return True
    if cookie is not None:
        for part in headers.get("cookie", "").split(";"):
            if part.strip().split("=", 1)[0] == cookie:
                return True
    return False


class AuthThrottle:
    """ASGI middleware applying one ``Throttle`` to every credential-offering request."""

    def __init__(
        self,
        app: ASGIApp,
        session_cookie: str | None = None,
        throttle: Throttle | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.session_cookie = session_cookie
        self.throttle = throttle or Throttle()
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _offers_credential(scope, self.session_cookie):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        key = str(client[0]) if client else ""
        wait = self.throttle.wait(key, self.clock())
        if wait > 0:
            await _too_many(send, math.ceil(wait))
            return
        status = 0

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, watched)
        if status == 401:
            self.throttle.failed(key, self.clock())
            if self.throttle.wait(key, self.clock()) > 0:
                log.warning(
                    "throttling sign-in attempts from %s after repeated failures", one_line(key)
                )


async def _too_many(send: Send, seconds: int) -> None:
    body = json.dumps(
        {"error": f"too many failed sign-ins or tokens from this address; retry in {seconds} s"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(seconds).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
