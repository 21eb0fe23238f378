"""A small TCP fault proxy (asyncio, in a thread) between workers and a database.

Modes, switchable at any time from the test's thread:

- ``pass``: forward both ways (after ``delay`` seconds per chunk, if set);
- ``drop``: refuse new connections (accept and close at once); ``cut()`` also closes every
  open connection — together, a database outage as the client sees it;
- ``stall``: accept new connections but forward nothing, and stop forwarding on open ones —
  a black hole (a hung server or a partition), the worst case for timeouts.

``freeze()`` black-holes only the connections open now, for good, while new ones pass: a
pooled connection stalled mid-query while the database itself is fine (a half-dead NAT entry,
a hung backend), which only a client-side read timeout gets out of.

Usage::

    with FaultProxy("127.0.0.1", 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/test"
        proxy.set_mode("drop"); proxy.cut()      # outage
        proxy.set_mode("pass")                   # back
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

MODES = ("pass", "drop", "stall")


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = 0
        self.mode = "pass"
        self.delay = 0.0
        self.accepted = 0
        self.cuts = 0
        self.freezes = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._open: set[int] = set()  # ids of the client connections being forwarded
        self._frozen: set[int] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._run, name="faultproxy", daemon=True)
        self._ready = threading.Event()

    # -- control (any thread) ----------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def set_mode(self, mode: str, *, delay: float | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode = mode
        if delay is not None:
            self.delay = delay

    def cut(self) -> None:
        """Close every open connection now (both directions, no goodbye)."""
        done = threading.Event()

        def _cut() -> None:
            for w in list(self._writers):
                transport: Any = w.transport
                transport.abort()
            self._writers.clear()
            self.cuts += 1
            done.set()

        self._loop.call_soon_threadsafe(_cut)
        done.wait(5)

    def freeze(self) -> None:
        """Stop forwarding, for good, on every connection open now; new ones pass."""
        done = threading.Event()

        def _freeze() -> None:
            self._frozen |= self._open
            self.freezes += 1
            done.set()

        self._loop.call_soon_threadsafe(_freeze)
        done.wait(5)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self.cut()

        async def _close() -> None:
            if self._server is not None:
                self._server.close()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            self._loop.stop()

        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(_close()))
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the loop ----------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, self.host, 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.mode == "drop":
            writer.transport.abort()
            return
        self._writers.add(writer)
        try:
            while self.mode == "stall":
                await asyncio.sleep(0.05)
                if writer.transport.is_closing():
                    return
            if self.mode == "drop":
                return
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        key = id(writer)
        self._open.add(key)
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, key),
                self._pipe(up_reader, writer, key),
                return_exceptions=True,
            )
        finally:
            self._open.discard(key)
            self._frozen.discard(key)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: int
    ) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                while (
                    self.mode == "stall" or key in self._frozen
                ) and not writer.transport.is_closing():
                    await asyncio.sleep(0.05)
                if self.delay:
                    await asyncio.sleep(self.delay)
                if writer.transport.is_closing():
                    break
                writer.write(data)
                await writer.drain()
        finally:
            writer.transport.abort()
