"""Whether a PostgreSQL connection reaches the server through a pooler or proxy, in one round
trip: what ``jobtrail doctor`` reports (``store/probe.py``, which adds its own look at the
transaction mode) and what the driver checks on its first connection when ``pooler=`` is not
set (a transaction pooler found at start makes the App take the pooler-safe
behaviour by itself).

Two signs, both free of false alarms on a direct connection. A pooler: the backend process id
the connection's start-up announced (``BackendKeyData``, kept for cancels) is not the one that
answers; a pooler that can move a client between server sessions must route its cancels, so it
answers the start-up itself and hands out cancel keys of its own (PgBouncer does, in session
mode too). A proxy: the port reached is not the one the server listens on (a TCP forwarder, a
container's port mapping: these keep each client's session). Neither tells a session pooler
from a transaction pooler (that takes several transactions: doctor's look); the driver
therefore takes any pooler it finds for a transaction pooler, which costs speed at worst,
unless ``pooler=`` says otherwise.
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from ...model.errors import StoreUnavailable
from ...model.urls import redact_url
from ..outage import OutageNotice

log = logging.getLogger("jobtrail.store")

#: The one statement of the look (its answer: the backend's pid and the server's port).
SIGNS_SQL = "SELECT pg_backend_pid(), current_setting('port')"


@dataclass(frozen=True)
class Signs:
    """What one round trip on a connection shows of what is between it and the server."""

    key_pid: int  # the backend pid the start-up announced
    backend_pid: int  # the backend that answered
    port: int | None  # the port the connection reached (None: not known)
    server_port: int  # the port the server listens on

    @property
    def pooler(self) -> bool:
        """A pooler answered the start-up (it may move this client between sessions)."""
        return self.key_pid != self.backend_pid

    @property
    def proxied(self) -> bool:
        """A pooler or any proxy is in between."""
        return self.pooler or (self.port is not None and self.port != self.server_port)

    def why(self) -> str:
        """What showed the pooler, in a few words (for a log line or doctor)."""
        found = []
        if self.key_pid != self.backend_pid:
            found.append("the connection's backend key is not the server backend's")
        if self.port is not None and self.port != self.server_port:
            found.append(
                f"port {self.port} is answered by a server listening on {self.server_port}"
            )
        return "; ".join(found) or "none"


def signs(conn: Any) -> Signs:
    """The signs on ``conn`` (a psycopg connection, autocommit): one round trip."""
    row = conn.execute(SIGNS_SQL, prepare=False).fetchone()
    try:
        port: int | None = int(conn.info.port)
    except (TypeError, ValueError):
        port = None
    return Signs(int(conn.info.backend_pid), int(row[0]), port, int(row[1]))


#: What a statement meant for one server session says when it met another (a transaction
#: pooler that ``pooler=`` did not name and the look at start did not find): the name was
#: prepared there already, or it is not prepared here. Either is raised before the statement
#: runs (Parse or Bind), so the same statement may be sent again.
SESSION_MIXUPS: tuple[type[psycopg.Error], ...] = (
    psycopg.errors.DuplicatePreparedStatement,
    psycopg.errors.InvalidSqlStatementName,
)


def session_mixup(exc: BaseException | None) -> bool:
    """Whether ``exc`` shows that consecutive statements of one connection reached different
    server sessions (``SESSION_MIXUPS``, or a prepared statement bound with another's
    parameters)."""
    if isinstance(exc, SESSION_MIXUPS):
        return True
    return isinstance(exc, psycopg.errors.ProtocolViolation) and "prepared statement" in str(exc)


class PoolerSense:
    """Mixed into ``PostgresDriver``: with ``pooler=`` unset, the first connection the driver
    opens is looked at (``signs``, one round trip, in ``Checkout._configure`` before any session
    setting), and a pooler found makes the driver run as with ``pooler="transaction"`` (no
    prepared statements, no session settings, no LISTEN but at an explicit ``listen_url``, so
    no hand-off either) with one WARNING. Until the look is made nothing listens
    (``_settle_pooler``). Unless pooled, each new connection is looked at too: two live
    connections given one server session show a transaction pooler (``pooler="session"`` given
    for one); and should one slip past both, a statement that meets another session
    (``session_mixup``) switches the driver the same way, its error becoming a
    ``StoreUnavailable`` that names the setting (the worker retries it; a single enqueue sends
    its statement again)."""

    url: str
    pooler: str | None
    pool: Any
    _pooled: bool
    _listen_url: str | None
    _connect_kwargs: dict[str, Any]
    _async: Any
    outage: OutageNotice  # Driver.__init__

    def _init_pooler_sense(self, listen_given: bool) -> None:
        self._listen_given = listen_given
        self._sensed = threading.Event()  # the look was made, or not needed
        if self.pooler is not None:
            self._sensed.set()
        self._sense_lock = threading.RLock()
        # the server backend each live connection of ours was given (the look's answer)
        self._backends: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        # whether the worker's start-up NOTIFY reached the LISTEN connection (check_wakeups):
        # None until asked; a LISTEN that does not hear its own NOTIFY is no proof of a live
        # session, so nothing is handed to a worker of this driver (hands_off)
        self._listen_proven: bool | None = None
        #: the WARNING this driver logged when it took the pooler-safe behaviour by itself
        self.pooler_warning: str | None = None

    @property
    def polls_only(self) -> bool:
        self._settle_pooler()
        return self._listen_url is None

    @property
    def hands_off(self) -> bool:
        # the proof first: a worker reads this each idle turn, and a look not made yet (the
        # store away since start) would be tried again each time
        return self._listen_proven is not False and not self.polls_only

    def _settle_pooler(self) -> bool:
        """Whether the look at start has been made: if not, through a connection of the pool
        (whose ``_configure`` makes it). ``False`` while the store cannot be reached: then
        nothing may rely on a session yet (the listener waits, ``check_wakeups`` fails)."""
        if self._sensed.is_set():
            return True
        try:
            with self._connection():  # type: ignore[attr-defined]
                pass
        except (psycopg.Error, PoolTimeout, StoreUnavailable):
            return False
        return self._sensed.is_set()

    def _sense(self, conn: Any) -> None:
        """The look, on each new connection ``conn`` while the driver is not pooled. The
        first, with ``pooler=`` unset: a pooler answered the start-up. Every one: two live
        connections of this driver were given one server session, which only a transaction
        pooler does (``pooler="session"`` given for one, or a pooler the first look missed)."""
        if self._pooled:
            return
        with self._sense_lock:
            if self._pooled:
                return
            first = not self._sensed.is_set()
            try:
                found = signs(conn)
            except psycopg.OperationalError:
                raise  # the connection broke: the next one looks
            except psycopg.Error as exc:  # something in between refused the look
                if first:  # pooler= unset: take it for a transaction pooler
                    self._take_pooled(
                        f"PostgreSQL at {redact_url(self.url)}: the look for a pooler failed "
                        f"({type(exc).__name__}) and pooler= is not set: running as with "
                        'pooler="transaction"; set pooler="transaction" (and a listen_url) or '
                        'pooler="session" to say what is in between'
                    )
                self._sensed.set()
                return
            if first and found.pooler:
                listen = (
                    "LISTEN at listen_url"
                    if self._listen_given
                    else "no LISTEN: idle workers poll; a listen_url (a direct or "
                    "session-pooled URL) has them woken at once"
                )
                self._take_pooled(
                    f"PostgreSQL at {redact_url(self.url)} is reached through a pooler "
                    f"({found.why()}) and pooler= is not set: running as with "
                    f'pooler="transaction" (no prepared statements, no session settings, '
                    f'{listen}); set pooler="transaction" and listen_url to say so, or '
                    'pooler="session" if the pooler keeps each client\'s session'
                )
            elif any(
                pid == found.backend_pid and not other.closed
                for other, pid in list(self._backends.items())
            ):
                setting = f'pooler="{self.pooler}"' if self.pooler else "pooler= not set"
                self._take_pooled(
                    f"PostgreSQL at {redact_url(self.url)} is reached through a transaction "
                    f"pooler ({setting}, but two connections of this process were given one "
                    'server session): running as with pooler="transaction" from now on; set '
                    'pooler="transaction" (and a listen_url, a direct or session-pooled URL, '
                    "for LISTEN)"
                )
            else:
                self._backends[conn] = found.backend_pid
            self._sensed.set()

    def _take_pooled(self, warning: str) -> None:
        """Run as with ``pooler="transaction"`` from now on, and say so once."""
        with self._sense_lock:
            if self._pooled:
                return
            self._connect_kwargs["prepare_threshold"] = None  # the async side's too
            self.pool.kwargs["prepare_threshold"] = None
            self._async.pooled = True
            if not self._listen_given:
                self._listen_url = None
            self._pooled = True
            self.pooler_warning = warning
            # an outage is now the pooler's to name ("the pooler at host:port")
            self.outage.where = self.outage.where.replace("the database at", "the pooler at", 1)
        log.warning("%s", warning)

    def _mixed_sessions(self, exc: BaseException) -> StoreUnavailable:
        """``exc`` (``session_mixup``) as the error a caller sees, once the driver switched."""
        setting = f'pooler="{self.pooler}"' if self.pooler else "pooler= not set"
        self._take_pooled(
            f"PostgreSQL at {redact_url(self.url)} is reached through a transaction pooler "
            f"({setting}, but a prepared statement met another server session): running as "
            'with pooler="transaction" from now on; set pooler="transaction" (and a '
            "listen_url, a direct or session-pooled URL, for LISTEN)"
        )
        return StoreUnavailable(
            f"PostgreSQL is reached through a transaction pooler ({setting}, but a statement "
            'met another server session): set pooler="transaction"',
            outage=False,
        )
