"""How idle PostgreSQL workers are woken: one ``LISTEN`` connection per driver (a daemon
thread, reconnecting with backoff, pinged through the watchdog so a stalled stream is noticed)
sets the wake-up event on each ``NOTIFY``. A wake-up only: polling still finds due work if a
notification is lost.

Behind a transaction pooler (``pooler="transaction"``) a LISTEN session cannot be kept through
the pool: the listener connects to ``listen_url`` (a direct or session-pooled URL), or there is
none and idle workers poll (``polls_only``). ``check_wakeups`` sends a NOTIFY through the pool
and reports whether the listener heard it (the worker warns when it did not)."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ...model.urls import redact_url
from ..outage import OutageNotice
from .connection import LISTEN_PING, _Watchdog

log = logging.getLogger("jobtrail.store")

#: Seconds ``check_wakeups`` waits for the listener to connect and for its own NOTIFY.
CHECK_TIMEOUT = 3.0


class Channels(NamedTuple):
    """A store's NOTIFY channels (``jobtrail_channel()``, migration 19)."""

    queued: str  # new work: the workers' wake-ups
    finished: str  # moves to a terminal state: result waiters


def listen_url_for(url: str, pooler: str | None, listen_url: str | None) -> str | None:
    """Where the LISTEN connection goes: ``listen_url`` when given, else the store's own URL,
    except behind a transaction pooler (``None``: no LISTEN, idle workers poll)."""
    if listen_url is None:
        return None if pooler == "transaction" else url
    if not isinstance(listen_url, str) or not listen_url.startswith(("postgresql:", "postgres:")):
        raise ValueError(
            "listen_url must be a postgresql:// URL (direct or session-pooled), not "
            f"{redact_url(str(listen_url))!r}"
        )
    try:
        psycopg.conninfo.conninfo_to_dict(listen_url)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"bad listen_url: {exc}") from None
    return listen_url


class Listening:
    """Mixed into ``PostgresDriver`` (which sets these fields in ``__init__``)."""

    url: str
    pool: ConnectionPool[psycopg.Connection[Any]]
    outage: OutageNotice  # Driver.__init__
    _listen_url: str | None
    _connect_kwargs: dict[str, Any]
    _wakeup: threading.Event
    _listener: threading.Thread | None
    _listener_lock: threading.Lock
    _closed: threading.Event
    _watchdog: _Watchdog | None
    _listening: threading.Event  # set while the LISTEN connection is up
    _heard: threading.Event  # set once the listener heard check_wakeups' NOTIFY
    _probe: str | None  # the payload of that NOTIFY
    _channels: Channels | None  # this store's channels, once asked
    sql: dict[str, str]  # the named queries (``Driver.__init__``)
    handoff_channel: str  # the hand-off's (handoff.py)
    queued_heard: int  # wake-ups of new work heard (Driver.queued_heard)
    _listen_handoff: Callable[[psycopg.Connection[Any]], None]
    _hold_handoff_lock: Callable[[psycopg.Connection[Any]], None]
    _note_handed: Callable[[str], None]
    _settle_pooler: Callable[[], bool]  # pooler.py: the look at start made (or impossible)
    _listen_proven: bool | None

    def wake(self) -> None:
        self.queued_heard += 1
        if not self._wakeup.is_set():  # set() takes the event's lock even when set already
            self._wakeup.set()

    def wait_for_work(self, timeout: float) -> bool:
        self._ensure_listener()
        woke = self._wakeup.wait(timeout)
        self._wakeup.clear()
        return woke

    def channels(self) -> Channels:
        """This store's NOTIFY channels: ``jobtrail_channel()`` (migration 19), asked once
        through the pool, where the statements that notify run (a ``listen_url``'s own
        search_path may differ). Raises ``psycopg.Error`` when the store does not answer."""
        if self._channels is None:
            with self.pool.connection() as conn:
                row = conn.execute(
                    "SELECT jobtrail_channel('queued'), jobtrail_channel('finished')"
                ).fetchone()
            assert row is not None
            self._channels = Channels(str(row[0]), str(row[1]))
        return self._channels

    def check_wakeups(self, timeout: float = CHECK_TIMEOUT) -> bool | None:
        """Whether a NOTIFY sent through the pool reaches the LISTEN connection within
        ``timeout`` seconds (``None`` when there is none: ``polls_only``). Checked once per
        driver; a failed check is tried again next time."""
        deadline = time.monotonic() + timeout
        if not self._settle_pooler():  # the store is away: nothing proven
            self._listen_proven = False
            return False
        if self._listen_url is None:
            return None
        if self._heard.is_set():
            self._listen_proven = True
            return True
        self._ensure_listener()
        if not self._listening.wait(max(0.0, deadline - time.monotonic())):
            self._listen_proven = False
            return False
        token = "jobtrail-check:" + secrets.token_hex(8)
        self._probe = token
        try:
            with self.pool.connection(timeout=max(0.1, deadline - time.monotonic())) as conn:
                conn.execute("SELECT pg_notify(jobtrail_channel('queued'), %s)", (token,))
        except (psycopg.Error, PoolTimeout):
            self._listen_proven = False
            return False
        # a LISTEN that does not hear its own NOTIFY (one through a transaction pooler, say)
        # proves no session: no hand-off to this driver's workers (pooler.py hands_off)
        self._listen_proven = self._heard.wait(max(0.0, deadline - time.monotonic()))
        return self._listen_proven

    @contextmanager
    def watch_finished(self) -> Iterator[Callable[[float], bool]]:
        # A LISTEN connection of the watch's own on the channel terminal moves notify (this
        # store's ``finished`` channel): the worker's listener and its wake-ups stay untouched.
        # It goes where the workers' LISTEN goes (``_listen_url``: none behind a transaction pooler
        # without listen_url). Without one (or the store is away, or the stream broke), the
        # wait is a plain sleep: polling.
        conn: psycopg.Connection[Any] | None = None
        try:
            if self._settle_pooler() and self._listen_url is not None:
                finished = self.channels().finished
                conn = psycopg.connect(self._listen_url, autocommit=True, **self._connect_kwargs)
                conn.execute(f"LISTEN {finished}")
                # completions notify only while a waiter is registered (0014); registered
                # after LISTEN and before the caller's first read of its task
                conn.execute(self.sql["result_waiter_add"])
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
                try:
                    conn.execute(self.sql["result_waiter_remove"])
                except psycopg.Error:  # a row left behind is cleared by the next waiter
                    pass
                conn.close()

    def _ensure_listener(self) -> None:
        if self._listen_url is None:
            return
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
                # no LISTEN before the look at start (pooler.py): it may find a pooler
                if not self._settle_pooler():
                    raise psycopg.OperationalError("the store cannot be reached")
                url = self._listen_url
                if url is None:  # a pooler was found, and no listen_url given: poll
                    self._listening.clear()
                    return
                queued = self.channels().queued
                with psycopg.connect(url, autocommit=True, **self._connect_kwargs) as conn:
                    self._listen_handoff(conn)
                    conn.execute(f"LISTEN {queued}")
                    delay = 0.2
                    self._listening.set()
                    self.queued_heard += 1
                    self._wakeup.set()  # we may have missed notifications while away
                    pinged = time.monotonic()
                    while not self._closed.is_set() and self._listen_url is not None:
                        for note in conn.notifies(timeout=0.5, stop_after=1):
                            if note.channel == self.handoff_channel:
                                self._note_handed(note.payload)
                            else:
                                self.queued_heard += 1
                                if note.payload == self._probe:
                                    self._heard.set()
                            self._wakeup.set()
                        self._hold_handoff_lock(conn)
                        if self._watchdog is not None and time.monotonic() - pinged >= LISTEN_PING:
                            # a stalled stream brings no notification and no error: ask
                            self._watchdog.enter(conn)
                            try:
                                conn.execute("")
                            finally:
                                self._watchdog.leave(conn)
                            pinged = time.monotonic()
            except psycopg.Error as exc:
                self._listening.clear()
                if self._closed.is_set():
                    return
                # said once per outage by the driver's notice (outage.py), not at each retry
                self.outage.failed(exc)
                log.debug(
                    "LISTEN connection lost (%s); reconnecting in %.1fs", type(exc).__name__, delay
                )
                self._closed.wait(delay)
                delay = min(5.0, delay * 2)
