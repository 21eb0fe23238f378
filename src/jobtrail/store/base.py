"""The driver seam: what every backend must do, named subject + verb, taking small dataclasses.

Dialect gaps (no ``SKIP LOCKED`` or ``LISTEN/NOTIFY`` in SQLite, no data-modifying CTEs) are
absorbed inside the drivers. Both drivers run the same conformance suite (``tests/conformance``).
Rows come back as plain dicts with times as aware UTC ``datetime`` and JSON already decoded.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from ..model.errors import StoreUnavailable
from ..model.machine import HELD, TERMINAL, State
from . import controls, flow, queries
from .durable import DurableStatements
from .outage import OutageNotice
from .reads import Reads
from .search import Search
from .statements import Statements
from .types import (
    NEW_TASK_DEFAULTS,
    TIME_COLUMNS,
    Claim,
    Move,
    NewTask,
    Row,
    Stamp,
    T,
    Tx,
    claimed_rows,
    dumps,
    inserted_row,
    iter_chunks,
    loads_payload,
)

__all__ = [
    "STATE_WRITERS",
    "Claim",
    "Driver",
    "Move",
    "NEW_TASK_DEFAULTS",
    "NewTask",
    "Row",
    "T",
    "TIME_COLUMNS",
    "Tx",
    "claimed_rows",
    "dumps",
    "inserted_row",
    "iter_chunks",
    "loads_payload",
]


#: The driver methods that write a task's state column (insert, claim, move, batch completion).
#: Only ``transition.py`` calls them (and the drivers, each
#: other): ``tests/unit/test_one_transition_path.py`` fails when another module does.
STATE_WRITERS = (
    "task_insert",
    "task_insert_alone",
    "task_insert_many",
    "task_insert_batches",
    "task_claim",
    "task_claim_unlimited",
    "task_complete_and_claim",
    "task_complete_many",
    "task_move",
)


#: The ``pooler=`` values (``None``: a direct connection, plain behaviour as ``"session"``).
POOLERS = ("session", "transaction")


def check_pooler(pooler: str | None) -> str | None:
    """``pooler`` when it is one jobtrail knows; ``ValueError`` naming the choices if not."""
    if pooler is None or pooler in POOLERS:
        return pooler
    raise ValueError(
        f"pooler must be 'transaction' (PgBouncer's pool_mode=transaction and the like), "
        f"'session' or None, not {pooler!r}"
    )


class Driver(Statements, DurableStatements, Reads, Search, abc.ABC):
    """A backend. Generic operations live here; each dialect supplies SQL and connections."""

    dialect: str
    #: True when ``task_move``/``task_insert``/``task_claim`` append their transitions in the
    #: same statement (PostgreSQL data-modifying CTEs); SQLite appends them with a second one.
    logs_in_statement: bool = False
    #: True when the sweep should keep the id marks (``id_mark``: PostgreSQL, 0027)
    id_marks: bool = False
    #: when this process next records an id mark (``services.sweeper``; monotonic seconds)
    id_mark_due: float = 0.0
    #: True when ``task_claim_unlimited`` is available (one statement per queue, with its
    #: transitions): PostgreSQL.
    claims_in_one_statement: bool = False

    def __init__(self) -> None:
        self.sql = queries.load(self.dialect)
        #: the queues whose last unlimited claim found tasks of several tenants waiting
        #: (``_note_fair``): their next claim is the fair statement
        self.fair_queues: set[str] = set()
        #: flipped by each claim of a keyed queue: whether its keyed tasks are taken first
        #: (store/flow.py)
        self.keyed_turn = False
        #: says an outage once and its end once (outage.py); the driver and the worker report
        self.outage = OutageNotice(f"the {self.dialect} store")

    # -- connections and transactions -----------------------------------------------------
    @abc.abstractmethod
    def transaction(
        self, *, write: bool = True, connection: Any = None
    ) -> AbstractContextManager[Tx]:
        """A transaction; ``write=True`` takes the write lock up front (SQLite ``BEGIN
        IMMEDIATE``). With ``connection=`` the caller's own open connection is used and its
        transaction is left for the caller to commit."""

    def single_statement(self, *, pinned: bool = False) -> AbstractContextManager[Tx]:
        """Where a driver operation that is one statement may run without BEGIN/COMMIT round
        trips: the statement is its own transaction, committed before its result returns.
        Only for operations documented as one statement on that driver; by default (and on
        SQLite) a write transaction. ``pinned``: the calling thread runs such statements in a
        loop; a driver may keep a connection for it instead of checking one out each time."""
        return self.transaction()

    def skip_flush_wait(self, tx: Tx) -> None:
        """Let ``tx``'s commit return before it reaches the disk (``wait_for_disk=False``).
        Nothing on SQLite: its ``synchronous`` is a setting of the connection, which cannot
        change inside a transaction; every commit waits for its fsync there."""

    def batch_transaction(self, *, connection: Any = None) -> AbstractContextManager[Tx]:
        """The transaction of a bulk enqueue (``task_insert_batches``, then ``notify_queued``
        for each queue), committed at its end as ``transaction`` is; a driver may send it
        whole, without waiting for the BEGIN or the notifications (PostgreSQL: one pipeline)."""
        return self.transaction(connection=connection)

    @abc.abstractmethod
    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied. Safe to run concurrently."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connections and stop the listener for good; App.close calls it."""

    async def aclose(self) -> None:
        """``close`` from a coroutine (PostgreSQL closes its async pool on the running loop)."""
        self.close()

    @abc.abstractmethod
    async def run_async(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` (synchronous code that uses this driver) awaited without
        blocking the event loop: PostgreSQL runs its statements on async connections
        (``bridge.py``), SQLite runs the call on a thread of its own (``offloop.py``)."""

    @abc.abstractmethod
    def wait_for_work(self, timeout: float) -> bool:
        """Block until a wake-up arrives or ``timeout`` passes. A wake-up is only a hint."""

    @abc.abstractmethod
    def wake(self) -> None:
        """Wake this process's waiting workers (a local hint)."""

    def _looking_for_work(self, tx: Tx) -> None:
        """Called in ``task_claim``'s transaction before it reads a queue (not for a claim
        that looks at none): a driver whose ``wait_for_work`` compares against what the
        claims saw notes it here (SQLite)."""

    @property
    def polls_only(self) -> bool:
        """True when no other process's enqueue wakes this one's idle workers: they find new
        work by polling (PostgreSQL behind a transaction pooler without a ``listen_url``)."""
        return False

    # -- the hand-off to idle workers (PostgreSQL with a LISTEN connection; 0018) -----------
    @property
    def hands_off(self) -> bool:
        """True when a single enqueue may hand its task straight to an idle worker of this
        store that registered itself (``idle_register``): it is inserted leased to that
        worker, which gets it from ``take_handed`` without a claim
        (docs/design_idle_handoff.md). A worker registers only while this is true."""
        return False

    #: How many wake-ups of new work this driver has heard (PostgreSQL's listener counts the
    #: ``jobtrail_queued`` notifications and its reconnections): a worker woken by a hand-off
    #: alone need not claim, for a task is handed over only from an otherwise empty queue.
    queued_heard = 0
    #: How many times this driver's LISTEN connection has (re)connected: a notification sent
    #: while it was away is lost, so a worker registered before a change must look for itself.
    listen_epoch = 0

    def idle_register(
        self, owner: str, queues: Sequence[str], kinds: Sequence[str], version: str | None
    ) -> None:
        """Register worker ``owner`` as idle (or again, after its handed task), serving
        ``queues`` and ``kinds``: the next task a single enqueue could hand over may be
        leased to it. A no-op where nothing is handed over."""

    def idle_unregister(self, owner: str) -> int | None:
        """Remove ``owner``'s registration; the id of the task handed to it since it registered
        (leased to it, whether or not its notification arrived), or ``None``."""
        return None

    def take_handed(self, owner: str) -> list[Row]:
        """The tasks handed to ``owner`` whose notifications arrived since the last call, as
        a claim returns them (the rows are leased to ``owner``, attempt 1)."""
        return []

    def check_wakeups(self, timeout: float = 3.0) -> bool | None:
        """Whether a wake-up sent through the store reaches this driver's listener (``None``
        when it has none to check)."""
        return None

    @abc.abstractmethod
    def watch_finished(self) -> AbstractContextManager[Callable[[float], bool]]:
        """A watch for tasks reaching a terminal state (``app.result``, which waits for one:
        docs/guide.md, "Results"): inside it, the yielded ``wait(timeout)`` blocks until some
        task may have finished since the watch began or the last wait (True) or ``timeout``
        passed (False). A hint only — the caller re-reads its task; a watch that cannot listen
        (the store is away) just sleeps. Started before the caller's first read, so a finish
        between the read and the wait is seen. Apart from ``wait_for_work``: a waiting caller
        never takes a worker's wake-up."""

    @abc.abstractmethod
    def encode_time(self, value: datetime) -> Stamp:
        """``value`` as this dialect stores a time (PostgreSQL: as is; SQLite: epoch seconds);
        every caller that passes a time to a statement."""

    def is_outage(self, error: BaseException) -> bool:
        """Whether ``error`` means the store could not be reached or was busy (worth retrying
        the same write), as opposed to a write the store refuses."""
        return isinstance(error, StoreUnavailable)

    @abc.abstractmethod
    def notify_queued(self, tx: Tx, queue: str) -> None:
        """Wake the workers of ``queue`` if and when ``tx`` commits (PostgreSQL NOTIFY; SQLite a
        local hint); every enqueue and every move back to queued."""

    # -- tasks ---------------------------------------------------------------------------------
    def task_insert(self, tx: Tx, new: NewTask) -> tuple[Row, bool]:
        """Insert one task with its creating transition; on an idempotency key that already
        exists, return the existing row and ``False`` (never a second row). A task with controls
        (debounce, a uniqueness window, expiry) is inserted by ``controls.insert``."""
        if new.controls is not None:
            return controls.insert(self, tx, new)
        params = self._insert_params(new)
        got = self._inserted(tx, params)
        if got is None:
            existing = tx.one(
                "task_get_by_key",
                {"tenant": new.tenant, "kind": new.kind, "idempotency_key": new.idempotency_key},
            )
            if existing is None:  # pragma: no cover - the conflicting row vanished (pruned)
                raise RuntimeError("idempotency conflict on a row that no longer exists")
            return existing, False
        # its enqueued transition is on the row the insert wrote (0027, both dialects)
        return inserted_row(new, *got, loads_payload(new.payload_json)), True

    def _insert_params(self, new: NewTask) -> dict[str, Any]:
        """The parameters of a task's insert (``controls.params`` adds the controls')."""
        return {
            "kind": new.kind,
            "queue": new.queue,
            "tenant": new.tenant,
            "state": new.state.value,
            "payload": new.payload_json,
            "payload_hash": new.payload_hash,
            "idempotency_key": new.idempotency_key,
            "priority": new.priority,
            "max_attempts": new.max_attempts,
            "lease_seconds": new.lease_seconds,
            "reentrant": new.reentrant,
            "run_at": self.encode_time(new.run_at) if new.run_at is not None else None,
            "delay": new.delay,
            "parent_id": new.parent_id,
            "actor": new.actor,
            "data": dumps(new.data),
        }

    @abc.abstractmethod
    def _inserted(self, tx: Tx, params: dict[str, Any]) -> tuple[int, datetime, datetime] | None:
        """Run ``task_insert``: what the database generated (id, ``created_at``, ``run_at``;
        ``task_insert`` builds the rest of the row from what it inserted), or None when the
        idempotency key exists."""

    def task_insert_alone(self, new: NewTask) -> tuple[Row, bool]:
        """``task_insert`` as its own committed transaction, waking workers when created."""
        with self.transaction() as tx:
            row, created = self.task_insert(tx, new)
            if created:
                self.notify_queued(tx, new.queue)
        return row, created

    def task_insert_unflushed(self, new: NewTask) -> tuple[Row, bool]:
        """``task_insert_alone`` whose commit need not wait for the disk
        (``wait_for_disk=False``); by default (SQLite) ``task_insert_alone`` itself."""
        return self.task_insert_alone(new)

    def task_insert_many(self, tx: Tx, news: Sequence[NewTask]) -> list[tuple[Row, bool]]:
        """``task_insert`` for each of ``news``, in order (drivers may do it in one go)."""
        return [self.task_insert(tx, new) for new in news]

    #: how many tasks ``enqueue_many`` hands ``task_insert_batches`` at a time
    insert_batch = 1000

    def task_insert_batches(
        self,
        tx: Tx,
        batches: Iterable[Sequence[NewTask]],
        made: Callable[[NewTask, int, datetime, datetime, Any], T],
    ) -> list[T]:
        """Insert tasks without idempotency keys or parents, all with the actor and data of the
        first, batch by batch in ``tx`` (each with its creating transition). For each task, in
        input order: ``made(new, id, created_at, run_at, payload)`` with what the database
        generated and the payload decoded from ``payload_json`` (called as each batch's
        results arrive, so a driver that pipelines overlaps it with the next insert)."""
        out: list[T] = []
        for batch in batches:
            for new, (row, _) in zip(batch, self.task_insert_many(tx, batch), strict=True):
                out.append(made(new, row["id"], row["created_at"], row["run_at"], row["payload"]))
        return out

    def task_expired_queued(self, tx: Tx, limit: int) -> list[int]:
        """Ids of up to ``limit`` queued tasks past their expiry, the oldest expiry first; the
        sweeper cancels them (``expired``). No claim takes them meanwhile."""
        return controls.expired_queued(tx, limit)

    def task_debounce_count(self, tx: Tx, task_id: int) -> int:
        """How many times task ``task_id`` was debounced (its ``debounced`` annotations);
        explain."""
        return controls.debounce_count(tx, task_id)

    def children_results(self, tx: Tx, task_id: int) -> list[Any]:
        """The results of the children of workflow parent ``task_id``, in their order (None
        for a child without one); the result of a sequential parent that succeeded."""
        return [r["result"] for r in tx.all("children_results", {"id": task_id})]

    def task_claim(self, tx: Tx, claim: Claim) -> list[Row]:
        """Edge 3 for up to ``claim.limit`` due tasks of unpaused queues, in the fair order
        (priority, then tenants in turn, then due time), within the concurrency limits and
        rates of limited queues (enforced here, in the claim, for every worker:
        ``flow.claim_queue``)."""
        common = {
            "owner": claim.owner,
            "kinds": self._list(claim.kinds),
            "data": dumps({"version": claim.version} if claim.version else {}),
            "version": claim.version or None,
        }
        limited = tx.all("queue_limits_lock", {"queues": self._list(claim.queues)})
        names = {q["name"] for q in limited}
        free = [q for q in claim.queues if q not in names]
        if free or (limited and not claim.skip_limited):
            self._looking_for_work(tx)
        rows: list[Row] = []
        for queue_name in free:
            room = claim.limit - len(rows)
            if room <= 0:
                break
            rows += tx.all(
                "task_claim", {**common, "queue": queue_name, "limit": room, "mode": "unpaused"}
            )
        for queue in [] if claim.skip_limited else limited:
            room = claim.limit - len(rows)
            if room <= 0:
                break
            rows += flow.claim_queue(self, tx, claim, queue, room, common)
        if not self.logs_in_statement:
            self._log_claimed(tx, claim, rows)
        rows.sort(key=lambda r: (-r["priority"], r["run_at"], r["id"]))
        return rows

    def _log_claimed(self, tx: Tx, claim: Claim, rows: list[Row]) -> None:
        """Append the ``claimed`` transition of each of ``rows`` (just claimed by ``claim``),
        in order — for drivers without ``logs_in_statement`` (drivers may do it in one go)."""
        for row in rows:
            data: dict[str, Any] = {"waited": round(float(row["waited"]), 6)}
            if claim.version:
                data["version"] = claim.version
            self.transition_insert(
                tx,
                row["id"],
                row["seq"],
                State.QUEUED,
                State.LEASED,
                "claimed",
                claim.owner,
                attempt=row["attempts"],
                at=row["updated_at"],
                data=data,
            )

    def task_claim_unlimited(self, tx: Tx, claim: Claim) -> list[Row]:
        """Edge 3 from those of ``claim.queues`` that have no concurrency limit (checked in
        each statement; a limited queue yields nothing), one self-contained statement per
        queue — so on a driver with ``claims_in_one_statement`` it may run in
        ``single_statement``. Limited queues are claimed by ``task_claim``."""
        if not self.claims_in_one_statement:
            raise NotImplementedError("claim with task_claim on this driver")
        common = {
            "owner": claim.owner,
            "kinds": self._list(claim.kinds),
            "data": dumps({"version": claim.version} if claim.version else {}),
            "version": claim.version or None,
        }
        rows: list[Row] = []
        for queue_name in claim.queues:
            room = claim.limit - len(rows)
            if room <= 0:
                break
            params = {**common, "queue": queue_name, "limit": room, "mode": "unlimited"}
            _, got = self._claim_by_gate(tx, queue_name, params, "task_claim_unlimited")
            rows += claimed_rows(got)
        rows.sort(key=lambda r: (-r["priority"], r["run_at"], r["id"]))
        return rows

    def _claim_by_gate(
        self, tx: Tx, queue: str, params: dict[str, Any], statement: str
    ) -> tuple[list[Row], list[Row]]:
        """Send ``statement`` (an unlimited claim with the one-tenant gate), or its ``_fair``
        twin when the queue's last gate found several tenants waiting. When a one-tenant
        statement's gate finds several (it claimed nothing then), the fair claim follows at
        once, as a statement of its own. Returns the first statement's rows and the rows that
        hold the claim (the same list unless the fair claim followed)."""
        was_fair = queue in self.fair_queues
        first = tx.all(statement + "_fair" if was_fair else statement, params)
        rows = first
        if self._note_fair(queue, first) and not was_fair:
            rows = tx.all("task_claim_unlimited_fair", params)
            self._note_fair(queue, rows)
        return first, rows

    def _note_fair(self, queue: str, rows: list[Row]) -> bool:
        """Remember what an unlimited claim's gate said of ``queue`` (its rows' ``fair``): whether
        tasks of several tenants wait in it, so that its next claim is the fair statement."""
        fair = bool(rows and rows[0].get("fair"))
        if fair:
            self.fair_queues.add(queue)
        else:
            self.fair_queues.discard(queue)
        return fair

    def task_complete_and_claim(
        self,
        tx: Tx,
        attempts: Sequence[tuple[int, int]],
        claim: Claim,
        queue: str,
        limit: int,
        results: Mapping[int, str] | None = None,
    ) -> tuple[set[int], list[Row]]:
        """``task_complete_many`` plus ``task_claim_unlimited`` from one queue as one
        statement (drivers with ``claims_in_one_statement`` only); returns the ids that
        completed and the claimed rows."""
        raise NotImplementedError("complete and claim in one transaction on this driver")

    def task_release_next(self, tx: Tx, child_id: int) -> list[Row]:
        """The next sequential sibling of ``child_id`` (which has just succeeded) becomes due
        now (its ``run_at``; its state stays ``queued``); returns the released rows (``id``,
        ``queue``)."""
        return tx.all("task_release_next", {"id": child_id})

    def queues_limited(self, tx: Tx, queues: list[str]) -> list[str]:
        """Which of ``queues`` have a concurrency limit now (a hint for which to claim with
        ``task_claim``; never trusted for enforcement)."""
        rows = tx.all("queue_limited_names", {"queues": self._list(queues)})
        return [r["name"] for r in rows]

    def task_next_due(
        self, tx: Tx, queues: list[str], kinds: list[str], within: float
    ) -> float | None:
        """Seconds (by the database clock) until the first queued task of ``queues`` and
        ``kinds`` is due, if one is due within ``within`` seconds (0 or less: due now);
        ``None`` when none is. What a draining burst worker waits for."""
        row = tx.one(
            "task_next_due",
            {"queues": self._list(queues), "kinds": self._list(kinds), "within": float(within)},
        )
        wait = None if row is None else row["wait"]
        return None if wait is None else float(wait)

    def task_move(self, tx: Tx, move: Move) -> Row | None:
        """The conditional update of one edge plus its transition row; ``None`` when the guard
        did not match (somebody else moved the task first)."""
        params = self._move_params(move)
        if move.annotation:
            row = tx.one("task_annotate", params)
        else:
            row = tx.one("task_move", params)
        if row is None:
            return None
        if not self.logs_in_statement:
            self.transition_insert(
                tx,
                row["id"],
                row["seq"],
                move.from_state,
                move.to_state,
                move.reason,
                move.actor,
                attempt=params["log_attempt"]
                if move.attempt is not None
                else row["attempts"] + (1 if move.uncount_attempt else 0),
                at=row["updated_at"],
                error_category=move.error_category,
                error=move.error,
                note=move.note,
                corrects=move.corrects,
                data=_exact_retry_at(move.data, row),
                traceback=move.traceback,
                error_class=move.error_class,
            )
        return row

    @abc.abstractmethod
    def task_complete_many(
        self,
        tx: Tx,
        owner: str,
        actor: str,
        attempts: Sequence[tuple[int, int]],
        results: Mapping[int, str] | None = None,
    ) -> set[int]:
        """Edge 4 (``leased`` → ``succeeded``, ``completed``) for several ``(task id, attempt)``
        of one holder in one transaction (one statement on PostgreSQL, which may therefore run
        in ``single_statement``; two on SQLite); returns the ids that moved. Each task keeps the
        worker guard of ``task_move``; a task whose guard fails is left untouched (the caller
        decides for it alone). Only for tasks without a parent: a workflow child's completion
        re-derives its parent (``transition.apply``). ``results``: the return value (JSON
        text) of each task id that returned one, stored in the same statement: a task is never
        ``succeeded`` without its result (docs/guide.md, "Results")."""

    def _move_params(self, move: Move) -> dict[str, Any]:
        return {
            "id": move.task_id,
            "from_state": move.from_state.value,
            "to_state": move.to_state.value,
            "reason": move.reason,
            "actor": move.actor,
            "terminal": move.to_state in TERMINAL,
            "keep_lease": move.to_state in HELD,
            "owner": move.owner,
            "expired_owner": move.expired_owner,
            "attempt": move.attempt,
            "log_attempt": move.attempt if move.attempt is not None else None,
            "run_in": move.run_in,
            "reset_attempts": move.reset_attempts,
            "uncount": move.uncount_attempt,
            "replay": 1 if move.replay else 0,
            "set_error": move.set_error,
            "error_category": move.error_category,
            "error": move.error,
            "receipt_id": move.receipt_id,
            "receipt_in": move.receipt_in,
            "note": move.note,
            "corrects": move.corrects,
            "data": dumps(move.data),
            "dismiss": move.reason == "dismissed",
            "set_result": move.set_result,
            "result": move.result,
            "traceback": move.traceback,
            "error_class": move.error_class,
        }

    def transition_insert(
        self,
        tx: Tx,
        task_id: int,
        seq: int,
        from_state: State | None,
        to_state: State,
        reason: str,
        actor: str,
        *,
        attempt: int,
        at: Stamp,
        error_category: str | None = None,
        error: str | None = None,
        note: str | None = None,
        corrects: int | None = None,
        data: dict[str, Any] | None = None,
        traceback: str | None = None,
        error_class: str | None = None,
    ) -> None:
        """Append one row to a task's transition log (append-only); only this driver's inserts,
        claims and moves call it."""
        tx.run(
            "transition_insert",
            {
                "task_id": task_id,
                "seq": seq,
                "from_state": from_state.value if from_state else None,
                "to_state": to_state.value,
                "reason": reason,
                "error_category": error_category,
                "error": error,
                "actor": actor,
                "attempt": attempt,
                "at": self.encode_time(at) if isinstance(at, datetime) else at,
                "note": note,
                "corrects": corrects,
                "data": dumps(data or {}),
                "traceback": traceback,
                "error_class": error_class,
            },
        )

    def lease_extend(
        self, tx: Tx, task_id: int, owner: str, attempt: int, seconds: float
    ) -> Row | None:
        """Push the lease on ``seconds`` only while ``owner`` still holds ``attempt`` unexpired (the
        row, else None); worker/lease.py and ``ctx.heartbeat``."""
        return tx.one(
            "lease_extend", {"id": task_id, "owner": owner, "attempt": attempt, "seconds": seconds}
        )

    def db_now(self, tx: Tx, *, big_read: bool = False) -> datetime:
        """The database's time. ``big_read``: the rest of ``tx`` is a read over a big store
        (``db_now_for_big_read``: no JIT compilation on PostgreSQL, even behind a pooler)."""
        row = tx.one("db_now_for_big_read" if big_read else "db_now")
        assert row is not None
        value = row["now"]
        assert isinstance(value, datetime)
        return value

    def _list(self, values: list[str]) -> Any:
        return values


def _exact_retry_at(data: dict[str, Any], row: Row) -> dict[str, Any]:
    """On SQLite the update and the transition are two statements, each reading the clock:
    write the run_at the update stored, not the caller's estimate, into ``retry_at``."""
    if "retry_at" in data and isinstance(row.get("run_at"), datetime):
        from ..model.models import iso

        return {**data, "retry_at": iso(row["run_at"])}
    return data
