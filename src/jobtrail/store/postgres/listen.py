"""How idle PostgreSQL workers are woken: one ``LISTEN`` connection per driver (a daemon
thread, reconnecting with backoff, pinged through the watchdog so a stalled stream is noticed)
sets the wake-up event on each ``NOTIFY``. A wake-up only: polling still finds due work if a
notification is lost."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from .connection import CHANNEL, FINISHED_CHANNEL, LISTEN_PING, _Watchdog

log = logging.getLogger("jobtrail.store")


class Listening:
    """Mixed into ``PostgresDriver`` (which sets these fields in ``__init__``)."""

    url: str
    _connect_kwargs: dict[str, Any]
    _wakeup: threading.Event
    _listener: threading.Thread | None
    _listener_lock: threading.Lock
    _closed: threading.Event
    _watchdog: _Watchdog | None

    def wake(self) -> None:
        if not self._wakeup.is_set():  # set() takes the event's lock even when set already
            self._wakeup.set()

    def wait_for_work(self, timeout: float) -> bool:
        self._ensure_listener()
        woke = self._wakeup.wait(timeout)
        self._wakeup.clear()
        return woke

    @contextmanager
    def watch_finished(self) -> Iterator[Callable[[float], bool]]:
        # A LISTEN connection of the watch's own on the channel terminal moves notify
        # (FINISHED_CHANNEL): the worker's listener and its wake-ups stay untouched. Without
        # it (the store is away, or the stream broke), the wait is a plain sleep: polling.
        conn: psycopg.Connection[Any] | None = None
        try:
            conn = psycopg.connect(self.url, autocommit=True, **self._connect_kwargs)
            conn.execute(f"LISTEN {FINISHED_CHANNEL}")
        except psycopg.Error as exc:
            log.info("result wait falls back to polling (%s)", type(exc).__name__)
            if conn is not None:
                conn.close()
            conn = None

        def wait(timeout: float) -> bool:
            nonlocal conn
            if conn is None:
                self._closed.wait(timeout)
                return False
            try:
                for _ in conn.notifies(timeout=timeout, stop_after=1):
                    return True
                return False
            except psycopg.Error:
                conn.close()
                conn = None
                return True  # something may have been missed: re-read now

        try:
            yield wait
        finally:
            if conn is not None:
                conn.close()

    def _ensure_listener(self) -> None:
        with self._listener_lock:
            if self._listener is None and not self._closed.is_set():
                self._listener = threading.Thread(
                    target=self._listen, name="jobtrail-listen", daemon=True
                )
                self._listener.start()

    def _listen(self) -> None:
        delay = 0.2
        while not self._closed.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, **self._connect_kwargs) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    delay = 0.2
                    self._wakeup.set()  # we may have missed notifications while away
                    pinged = time.monotonic()
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._wakeup.set()
                        if self._watchdog is not None and time.monotonic() - pinged >= LISTEN_PING:
                            # a stalled stream brings no notification and no error: ask
                            self._watchdog.enter(conn)
                            try:
                                conn.execute("")
                            finally:
                                self._watchdog.leave(conn)
                            pinged = time.monotonic()
            except psycopg.Error as exc:
                if self._closed.is_set():
                    return
                log.warning(
                    "LISTEN connection lost (%s); reconnecting in %.1fs", type(exc).__name__, delay
                )
                self._closed.wait(delay)
                delay = min(5.0, delay * 2)
