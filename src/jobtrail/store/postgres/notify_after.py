"""The wake-up of a single enqueue that runs beside another, sent after its commit.

NOTIFY is transactional, and PostgreSQL makes it so with one lock per database: a transaction
that sent a NOTIFY takes it at commit and holds it until its commit is flushed (``async.c``,
``PreCommit_Notify``). Enqueues that each NOTIFY inside their own transaction therefore commit
one after another, each waiting for its own flush: 16 threads enqueuing at once measured 1.4-2.7x
one thread, where the same inserts without the NOTIFY share their flushes (about 20x here,
docs/performance.md, "Concurrent enqueuers").

So a single enqueue that starts while another of this driver is in flight (its express
connection is taken) inserts with ``task_insert_quiet`` (``task_insert`` without the NOTIFY)
and leaves its queue's wake-up to the driver's notifier thread, which sends it after the
commit in a transaction of its own that writes nothing and so waits for no flush. One NOTIFY
per queue covers every commit that returned before the notifier took its queue: a burst of
enqueues is woken by a few. The enqueue does not wait for it (a worker hears of the task one
round trip later than in the statement itself). A wake-up that fails is not the enqueue's
failure (the task is committed): the workers' poll (``poll_interval``) finds the task.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

#: What ``task_insert`` sends; ``task_insert_quiet`` returns NULL in its place.
_NOTIFY = "pg_notify(jobtrail_channel('queued'), queue)::text"


def quiet_insert(sql: str) -> str:
    """``task_insert`` without its NOTIFY (same columns: ``notified`` is NULL)."""
    if sql.count(_NOTIFY) != 1:  # the statement changed: this must follow it
        raise RuntimeError("task_insert no longer sends its NOTIFY as notify_after.py expects")
    return sql.replace(_NOTIFY, "NULL::text")


class NotifyAfterCommit:
    """Mixed into ``PostgresDriver`` (``_init_notify_after`` from its ``__init__``,
    ``_stop_notifier`` from its ``close``)."""

    sql: dict[str, str]
    _pooled_statement: Callable[[], AbstractContextManager[Any]]

    def _init_notify_after(self) -> None:
        # a copy: the loaded statements are shared (and compared across dialects)
        self.sql = {**self.sql, "task_insert_quiet": quiet_insert(self.sql["task_insert"])}
        self._notify_cond = threading.Condition()
        self._notify_pending: set[str] = set()
        self._notifier: threading.Thread | None = None
        self._notifier_stop = False

    def _notify_after_commit(self, queue: str) -> None:
        """Wake the workers of ``queue`` for a task whose commit has returned."""
        with self._notify_cond:
            if self._notifier_stop:
                return
            self._notify_pending.add(queue)
            if self._notifier is None:
                self._notifier = threading.Thread(
                    target=self._notify_loop, name="jobtrail-notifier", daemon=True
                )
                self._notifier.start()
            self._notify_cond.notify()

    def _notify_loop(self) -> None:
        while True:
            with self._notify_cond:
                while not self._notify_pending and not self._notifier_stop:
                    self._notify_cond.wait()
                if not self._notify_pending:
                    return  # stopped, nothing left to send
                queues, self._notify_pending = sorted(self._notify_pending), set()
            try:
                with self._pooled_statement() as tx:
                    for queue in queues:
                        tx.one("notify_queued", {"queue": queue})
            except Exception:  # the tasks are committed: the workers' poll finds them
                pass

    def _stop_notifier(self) -> None:
        """Send what is pending, then end the thread (before the pool closes)."""
        with self._notify_cond:
            self._notifier_stop = True
            self._notify_cond.notify()
            thread = self._notifier
        if thread is not None:
            thread.join(timeout=5)
