"""What a client may hold of ``jobtrail serve`` (docs/security.md, Hostile clients).

uvicorn alone lets a socket that never sends a whole request stay open for ever (its
keep-alive timeout starts only after a response) and takes every connection it is offered
until the process runs out of file descriptors; each refused ``accept`` is then logged with a
traceback (a probe with ~20,000 idle sockets grew the log by 187 MB in a minute). Here:

- **A read deadline.** A request's head and body must arrive within ``read_timeout`` seconds of
  its first byte (of the connection, for the first request): a silent socket, or one sending a
  byte a second, is answered ``408`` (when no request has started) and closed. Once a request
  is in, the deadline is off: the answer may take as long as the route needs (a result wait).
  Between requests uvicorn's keep-alive timeout (5 s) closes an idle connection.
- **A connection cap.** Past ``max_connections`` open connections a new one is closed at once,
  before it costs more than its accept; the default is 1,000, and never more than half the
  process's file-descriptor limit, so the server keeps descriptors for its store and files.
- **One line a minute.** Each condition is logged once (WARNING), then at most once a minute
  with how often it happened meanwhile (``OncePerMinute``); so is the event loop's "out of
  system resource" at ``accept``, should the descriptors run out anyway.

``guarded_protocol`` makes the uvicorn protocol class that does this (uvicorn's own h11 one,
with the deadline and the cap added).
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("jobtrail.web")

READ_TIMEOUT = 30.0
MAX_CONNECTIONS = 1000
#: How often a repeated condition is logged at most.
EVERY = 60.0
_FINISHED = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)
_TIMEOUT_BODY = json.dumps({"error": "the request did not arrive in time"}).encode()
_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\nconnection: close\r\n\r\n"
) + _TIMEOUT_BODY


def default_max_connections() -> int:
    """1,000, or half the soft limit on open files when that is lower (at least 16)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft // 2))


class OncePerMinute:
    """Log a repeated condition once, then at most once per ``every`` seconds with the count
    of the times it was not logged."""

    def __init__(
        self,
        logger: logging.Logger = log,
        every: float = EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.every = every
        self.clock = clock
        self._last: dict[str, float] = {}
        self._unsaid: dict[str, int] = {}

    def warn(self, key: str, message: str, *args: Any) -> bool:
        """Log ``message % args`` if ``key`` was not logged in the last ``every`` seconds;
        return whether it was."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            self._unsaid[key] = self._unsaid.get(key, 0) + 1
            return False
        unsaid = self._unsaid.pop(key, 0)
        self._last[key] = now
        more = f" ({unsaid} more times in the last {self.every:g} s)" if unsaid else ""
        self.logger.warning(message + more, *args)
        return True


def guarded_protocol(
    read_timeout: float, max_connections: int, reporter: OncePerMinute
) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the read deadline and the connection cap above."""
    if not read_timeout > 0 or max_connections < 1:
        raise ValueError("read_timeout must be above 0 and max_connections at least 1")

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                reporter.warn(
                    "cap",
                    "connection cap reached: %d connections open (--max-connections); "
                    "closing new ones until some end",
                    max_connections,
                )
                transport.abort()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.is_closing():
                self._disarm()
            elif self.conn.their_state in _FINISHED:
                self._disarm()  # the request is in: its answer may take its time
            else:
                self._arm()  # a request has begun (or the first has not): it must finish

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            reporter.warn(
                "slow",
                "closed a connection that sent no complete request within %g s (--read-timeout)",
                read_timeout,
            )
            if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
                self.transport.write(_TIMEOUT_ANSWER)  # nothing of an answer was sent yet
            self.transport.close()

    return Guarded


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, reporter: OncePerMinute) -> None:
    """Log the event loop's "socket.accept() out of system resource" (no descriptor left)
    once a minute instead of once per refused accept, with a traceback each time."""
    default = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if "accept" in message and isinstance(context.get("exception"), OSError):
            exc = context["exception"]
            reporter.warn("accept", "cannot accept connections: %s (%s)", message, exc.strerror)
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
