"""The PostgreSQL side of the hand-off to idle workers (0018, docs/design_idle_handoff.md).

A worker whose pump has nothing to do registers in ``jobtrail_idle_workers`` with this
driver's channel and advisory-lock key. The driver's LISTEN connection listens on that channel
and holds the lock for as long as it is up: that is what makes the registration live for an
enqueuer (``task_insert_handoff`` skips a row whose lock it could take). A single enqueue that
hands its task over notifies the channel with the task's row; the listener parks it here until
the worker's pump takes it (``take_handed``).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg

from ..types import TIME_COLUMNS, Row
from .insert import text_array

log = logging.getLogger("jobtrail.store")

#: The columns of a handed task's row that ``task_insert_handoff`` does not send: what the
#: statement wrote for every handed task (the rest comes with the notification).
HANDED: dict[str, Any] = {
    "state": "leased",
    "attempts": 1,
    "last_reason": "claimed",
    "last_error_category": None,
    "last_error": None,
    "replay_count": 0,
    "receipt_id": None,
    "parent_id": None,
    "finished_at": None,
    "idempotency_key": None,
    "receipt_deadline": None,
    "dismissed_at": None,
    "result": None,
}

#: Seconds between two looks at the idle registry by a driver whose last look found no worker
#: registered (``_may_hand_off``).
RECHECK = 0.5

#: The prefix of a driver's own channel (the rest is random: one per driver, so per process).
HANDOFF_PREFIX = "jobtrail_h_"


class HandOff:
    """Mixed into ``PostgresDriver`` (``_init_handoff`` from its ``__init__``)."""

    sql: dict[str, str]
    _wakeup: threading.Event

    def _init_handoff(self) -> None:
        self.handoff_channel = HANDOFF_PREFIX + secrets.token_hex(8)
        # a session advisory lock of our own: 63 random bits (a clash with another driver's
        # only makes both look alive to each other's liveness probe, never hands to a dead one)
        self.handoff_lock_key = secrets.randbits(62)
        self._handed: list[Row] = []
        self._handed_lock = threading.Lock()
        self.listen_epoch = 0
        self._handoff_locked = False
        self._idle_seen = True
        self._idle_checked = float("-inf")

    def _may_hand_off(self) -> bool:
        """Whether a single enqueue should run the hand-off's statement: while its last run
        found workers registered, and at least every ``RECHECK`` seconds. The registry probe
        and the gates cost a busy enqueuer a few percent per enqueue when no worker is idle;
        an enqueue after a quiet spell (the idle case the hand-off is for) always looks."""
        return self._idle_seen or time.monotonic() - self._idle_checked >= RECHECK

    def _saw_idle(self, seen: bool) -> None:
        self._idle_seen = seen
        self._idle_checked = time.monotonic()

    def _listen_handoff(self, conn: psycopg.Connection[Any]) -> None:
        """On a (re)connected LISTEN connection: take our lock and listen on our channel."""
        self._handoff_locked = False
        self._hold_handoff_lock(conn)
        conn.execute(f"LISTEN {self.handoff_channel}")
        self.listen_epoch += 1

    def _hold_handoff_lock(self, conn: psycopg.Connection[Any]) -> None:
        """Take our advisory lock if we do not hold it. Not waiting for it: after a network
        cut the server may keep our previous session (and the lock) until it notices, and the
        listener must listen meanwhile; the listener tries again at each of its turns. While
        another session of ours holds it, enqueuers still see us alive, rightly."""
        if self._handoff_locked:
            return
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.handoff_lock_key,)).fetchone()
        self._handoff_locked = bool(row and row[0])

    def _note_handed(self, payload: str) -> None:
        """The listener heard a hand-off: park the task's row for the pump."""
        try:
            row: dict[str, Any] = json.loads(payload)
            int(row["id"])
            for name in TIME_COLUMNS & row.keys():
                value = row[name]
                if isinstance(value, str):
                    row[name] = datetime.fromisoformat(value).astimezone(UTC)
        except (ValueError, TypeError, KeyError):  # not ours: someone NOTIFYed our channel
            log.warning("ignored a notification on %s that is not a task", self.handoff_channel)
            return
        if "kind" in row:
            row = {**HANDED, "updated_at": row["created_at"], **row}
        with self._handed_lock:
            self._handed.append(row)
        self._wakeup.set()

    def take_handed(self, owner: str) -> list[Row]:
        with self._handed_lock:
            if not self._handed:
                return []
            mine = [r for r in self._handed if r.get("lease_owner") == owner]
            self._handed = [r for r in self._handed if r.get("lease_owner") != owner]
        return mine

    def idle_register(
        self, owner: str, queues: Sequence[str], kinds: Sequence[str], version: str | None
    ) -> None:
        with self.single_statement(pinned=True) as tx:  # type: ignore[attr-defined]
            tx.run(
                "idle_register",
                {
                    "owner": owner,
                    "queues": text_array(tuple(queues)),
                    "kinds": text_array(tuple(kinds)),
                    "channel": self.handoff_channel,
                    "lock_key": self.handoff_lock_key,
                    "version": version,
                },
            )
        self._idle_seen = True  # our own enqueues look at once

    def idle_unregister(self, owner: str) -> int | None:
        with self.single_statement(pinned=True) as tx:  # type: ignore[attr-defined]
            row = tx.one("idle_unregister", {"owner": owner})
        return None if row is None or row["handed"] is None else int(row["handed"])
