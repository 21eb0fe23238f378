"""One line per outage: a store that stops answering is said once, at WARNING —
what failed, where (the database or the pooler at host:port), since when, and that jobtrail
keeps retrying —, reminded at most once a minute, and its return is said once, at INFO, with
how long it was away. The worker, ``serve`` and a producer's ``App`` all learn of it through
their driver's ``OutageNotice``: the driver reports each failure to reach the store
(``failed``) and each statement that got its answer (``answered``); the callers no longer log
each failed claim, sweep or prune themselves.

And the pool's own chatter: psycopg_pool logs every check-out at INFO and every failed
connection attempt at WARNING. ``quiet_pool_logs`` drops the records about jobtrail's own pools
(a filter on the ``psycopg.pool`` logger; another pool of the same process still logs)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

log = logging.getLogger("jobtrail.store")

#: At most one reminder per this many seconds while the store stays away.
REMIND_EVERY = 60.0
#: The store is back once statements have been getting their answers for this long with no
#: failure in between: the first answers after a restart may come while other connections
#: still fail (one from before that is used unchecked, an attempt begun during the outage).
SETTLE = 1.0


class OutageNotice:
    """The outage state of one store, as its driver sees it (thread-safe)."""

    def __init__(self, where: str) -> None:
        self.where = where  # "the database at host:port", "the pooler at host:port"
        self._lock = threading.Lock()
        self._down_since: float | None = None  # wall clock (time.time) of the first failure
        self._down_mono = 0.0
        self._last_failure = 0.0  # monotonic
        self._last_said = 0.0  # monotonic: the WARNING or the latest reminder
        self._first_answer: float | None = None  # monotonic: the first answer after a failure
        # a store that never answered is not an outage: the caller's error says why (a
        # refused connection at start is one line of the CLI, not a WARNING before it)
        self._answered_once = False

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, error: BaseException | str) -> None:
        """The store could not be reached (a connection refused or broken, a pooler that has
        no server): the first failure of an outage is logged, later ones every minute. Before
        the store first answered nothing is logged (that is a start that failed, not an
        outage: the caller's exception says it)."""
        if not self._answered_once:
            return
        now = time.monotonic()
        with self._lock:
            self._last_failure = now
            self._first_answer = None
            if self._down_since is None:
                self._down_since, self._down_mono, self._last_said = time.time(), now, now
                since = datetime.fromtimestamp(self._down_since, UTC).strftime("%H:%M:%S")
                log.warning(
                    "store unreachable: %s has not answered since %s UTC (%s); retrying until "
                    "it does",
                    self.where,
                    since,
                    _what(error),
                )
                return
            if now - self._last_said < REMIND_EVERY:
                return
            self._last_said = now
            away = now - self._down_mono
        log.warning(
            "store still unreachable: %s, for %s now (%s); still retrying",
            self.where,
            _duration(away),
            _what(error),
        )

    def answered(self) -> None:
        """A statement got its answer. Cheap when the store was not away (one attribute read):
        called after every transaction."""
        if self._down_since is None:
            self._answered_once = True
            return
        now = time.monotonic()
        with self._lock:
            if self._down_since is None:
                return
            if self._first_answer is None:
                self._first_answer = now
            if now - self._first_answer < SETTLE:  # a failure since would have reset it
                return
            away = self._first_answer - self._down_mono
            self._down_since = None
            self._first_answer = None
        log.info("store back: %s answers again after %s away", self.where, _duration(away))


def _what(error: BaseException | str) -> str:
    if isinstance(error, str):
        text = error
    else:
        # a wrapped error says the driver's words first: the cause's first line is the server's
        lines = str(error).strip().splitlines()
        text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    text = " ".join(text.split())  # one line, whatever the server said
    return text if len(text) <= 200 else text[:197] + "..."


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f}s"
    return f"{seconds / 60:.0f} min"


def where(host: str | None, port: str | int | None, *, pooler: bool) -> str:
    """``the database at host:port`` (or ``the pooler at …`` when the URL names a pooler)."""
    what = "the pooler" if pooler else "the database"
    if not host or host.startswith("/"):
        place = f"the local socket{f' {host}' if host else ''}, port {port or 5432}"
        return f"{what} at {place}"
    return f"{what} at {host}:{port or 5432}"


class _OurPools(logging.Filter):
    """Drops psycopg_pool's records about pools named ``jobtrail…``: the pool's name in the
    arguments, a connection of such a pool, or one of the pool's own threads."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.threadName or "").startswith(("jobtrail-worker", "jobtrail-scheduler")):
            return False
        args = record.args if isinstance(record.args, tuple) else (record.args,)
        for arg in args:
            if isinstance(arg, str):
                if arg.startswith("jobtrail"):
                    return False
                continue
            pool = getattr(arg, "_pool", None)
            if str(getattr(pool, "name", "")).startswith("jobtrail"):
                return False
        return True


_FILTER = _OurPools()


def quiet_pool_logs() -> None:
    """Keep psycopg_pool's messages about jobtrail's pools out of the log (idempotent)."""
    pool_log = logging.getLogger("psycopg.pool")
    if _FILTER not in pool_log.filters:
        pool_log.addFilter(_FILTER)
