"""The claim of one limited queue (concurrency limits and rates), for both
backends alike: the driver has locked the queue's row (PostgreSQL) or holds the write lock
(SQLite), so claims of this queue take turns and each sees the buckets the last one left.

Every time is the database's (``db_now`` of the locked row, and ``now()`` in the writes).
The arithmetic of buckets and ramps is ``model.rates``.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..model import rates
from .types import Claim, Row, Tx, dumps

if TYPE_CHECKING:
    from .base import Driver

#: the room a tenant has when nothing limits it (beyond the claim's own limit)
_UNBOUNDED = 1 << 30
#: how many due keyed tasks (beyond three claims' worth) a keyed claim's quick look reads
KEYED_SCAN = 10


def claim_queue(
    driver: Driver, tx: Tx, claim: Claim, queue: Row, room: int, common: dict[str, Any]
) -> list[Row]:
    """Up to ``room`` tasks of the limited ``queue`` (its locked row, with ``db_now``), within
    its concurrency limits and the rooms of its buckets; takes the tokens it used."""
    name = queue["name"]
    now = queue["db_now"]
    if queue.get("rate_until") is not None and now >= queue["rate_until"]:
        tx.run("queue_rate_end", {"name": name})  # a resume ramp is over: no rate any more
    rate = rates.of(queue, now)
    if queue["limit_total"] is not None:
        held = tx.one("queue_held_count", {"queue": name})
        room = min(room, queue["limit_total"] - (held["n"] if held else 0))
    tokens = None
    bound = False  # the queue's bucket, not the claim's room, decides how many
    if rate is not None and rate.per_second is not None:
        tokens = rates.tokens(rate, rate.per_second, queue["tokens"], queue["tokens_at"], now)
        bound = rates.room(tokens) < room
        room = min(room, rates.room(tokens))
    if room <= 0:
        if bound and rate is not None and rate.per_second is not None and tokens is not None:
            claim.slots.append(rates.next_slot(rate, rate.per_second, tokens, now))
        return []
    default_room = _UNBOUNDED
    rooms: dict[str, int] = {}
    if queue["limit_per_tenant"] is not None:
        default_room = queue["limit_per_tenant"]
        for r in tx.all("queue_tenants_held", {"queue": name}):
            rooms[r["tenant"]] = max(0, queue["limit_per_tenant"] - r["n"])
    tenant_tokens: dict[str, float] = {}
    if rate is not None and rate.per_tenant is not None:
        full = rate.per_tenant
        since = now - timedelta(seconds=rates.full_until(rate, full))
        default_room = min(default_room, rates.room(rate.capacity(full, now)))
        for r in tx.all("tenant_rate_list", {"queue": name, "since": driver.encode_time(since)}):
            left = rates.tokens(rate, full, r["tokens"], r["tokens_at"], now)
            tenant_tokens[r["tenant"]] = left
            rooms[r["tenant"]] = min(rooms.get(r["tenant"], _UNBOUNDED), rates.room(left))
    rooms = {t: n for t, n in rooms.items() if n < default_room}
    if queue.get("kind_rated"):
        rows = _claim_kinds(driver, tx, claim, queue, room, rooms, default_room, common)
    else:
        rows = _claim_rooms(driver, tx, queue, room, rooms, default_room, common)
    if tokens is not None:
        tx.run("queue_tokens_set", {"name": name, "tokens": tokens - len(rows)})
        if bound and rate is not None and rate.per_second is not None:
            claim.slots.append(rates.next_slot(rate, rate.per_second, tokens - len(rows), now))
    if rate is not None and rate.per_tenant is not None:
        _take_tenant_tokens(driver, tx, name, rate, now, rows, tenant_tokens)
        if not rows:
            _tenant_slot(claim, rate, now, tenant_tokens)
    return rows


def _claim_rooms(
    driver: Driver,
    tx: Tx,
    queue: Row,
    room: int,
    rooms: dict[str, int],
    default_room: int,
    common: dict[str, Any],
) -> list[Row]:
    """Up to ``room`` tasks of ``queue`` within the tenants' ``rooms``: its keyed tasks
    (``task_claim_keyed``: at most each task's ``concurrency_limit`` leased per key, in due
    order) and its other tasks (``task_claim_limited``), the two taken first in turns from one
    claim to the next so that neither waits behind the other's backlog."""
    statements = ["task_claim_limited"]
    if queue.get("keyed"):
        driver.keyed_turn = not driver.keyed_turn
        keyed_first = driver.keyed_turn
        statements = (
            ["task_claim_keyed", "task_claim_limited"]
            if keyed_first
            else ["task_claim_limited", "task_claim_keyed"]
        )
    rows: list[Row] = []
    for statement in statements:
        left = room - len(rows)
        if left <= 0:
            break
        params = {
            **common,
            "queue": queue["name"],
            "mode": "limited",
            "limit": left,
            "rooms": dumps(rooms),
            "default_room": min(default_room, left),
        }
        if statement == "task_claim_keyed":
            got = _claim_keyed(tx, params, rooms, default_room)
        else:
            got = tx.all(statement, params)
        if got:
            for tenant, n in Counter(r["tenant"] for r in got).items():
                rooms[tenant] = max(0, rooms.get(tenant, default_room) - n)
        rows += got
    return rows


def _claim_keyed(
    tx: Tx, params: dict[str, Any], rooms: dict[str, int], default_room: int
) -> list[Row]:
    """The keyed tasks of a claim: ``task_claim_keyed_due`` (the first due keyed tasks in the
    claim's order, a read of about ``KEYED_SCAN`` rows), then, when it found less than the
    claim's room, ``task_claim_keyed`` (a walk of every key with queued tasks) for the rest —
    the rows the first took are leased by then, so the second counts them."""
    limit = params["limit"]
    got = tx.all("task_claim_keyed_due", {**params, "scan": KEYED_SCAN + 3 * limit})
    left = limit - len(got)
    if left > 0:
        rest = dict(rooms)
        for tenant, n in Counter(r["tenant"] for r in got).items():
            rest[tenant] = max(0, rest.get(tenant, default_room) - n)
        got += tx.all(
            "task_claim_keyed",
            {
                **params,
                "limit": left,
                "rooms": dumps(rest),
                "default_room": min(default_room, left),
            },
        )
    return got


def _claim_kinds(
    driver: Driver,
    tx: Tx,
    claim: Claim,
    queue: Row,
    room: int,
    rooms: dict[str, int],
    default_room: int,
    common: dict[str, Any],
) -> list[Row]:
    """``_claim_rooms`` for a queue with rates per kind: each kind with a rate within the room
    of its bucket (whose tokens it takes), then the kinds without one with the room left (a
    rated kind takes no more than its bucket, so neither side can starve the other)."""
    name, now = queue["name"], queue["db_now"]
    buckets = {b["kind"]: b for b in driver.kind_rate_list(tx, queue=name)}
    free = [k for k in claim.kinds if k not in buckets]
    rows: list[Row] = []
    for kind in claim.kinds:
        bucket = buckets.get(kind)
        left = room - len(rows)
        if bucket is None or left <= 0:
            continue
        rate = rates.of_kind(bucket)
        assert rate.per_second is not None
        tokens = rates.tokens(rate, rate.per_second, bucket["tokens"], bucket["tokens_at"], now)
        kind_room = min(left, rates.room(tokens))
        got: list[Row] = []
        if kind_room > 0:
            kinds = {**common, "kinds": driver._list([kind])}
            got = _claim_rooms(driver, tx, queue, kind_room, rooms, default_room, kinds)
            driver.kind_tokens_set(tx, queue=name, kind=kind, tokens=tokens - len(got))
            rows += got
        if kind_room < left and len(got) == kind_room:  # the bucket, not the tasks, stopped it
            claim.slots.append(rates.next_slot(rate, rate.per_second, tokens - len(got), now))
    if free and room > len(rows):
        kinds = {**common, "kinds": driver._list(free)}
        rows += _claim_rooms(driver, tx, queue, room - len(rows), rooms, default_room, kinds)
    return rows


def _take_tenant_tokens(
    driver: Driver,
    tx: Tx,
    queue: str,
    rate: rates.Rate,
    now: Any,
    rows: list[Row],
    tenant_tokens: dict[str, float],
) -> None:
    assert rate.per_tenant is not None
    full = rate.per_tenant
    taken = Counter(r["tenant"] for r in rows)
    if taken:
        left = {t: tenant_tokens.get(t, rate.capacity(full, now)) - n for t, n in taken.items()}
        tx.run("tenant_rate_upsert", {"queue": queue, "tokens": dumps(left)})
    # buckets untouched for this long are full again: forget them now and then
    if math.floor(now.timestamp()) % 60 == 0:
        since = now - timedelta(seconds=rates.full_until(rate, full))
        tx.run("tenant_rate_forget", {"queue": queue, "since": driver.encode_time(since)})


def _tenant_slot(claim: Claim, rate: rates.Rate, now: Any, tenant_tokens: dict[str, float]) -> None:
    """Nothing claimed and the tenants' buckets may be why: the soonest of their next slots."""
    assert rate.per_tenant is not None
    waits = [
        rates.next_slot(rate, rate.per_tenant, left, now)
        for left in tenant_tokens.values()
        if left < 1.0
    ]
    if waits:
        claim.slots.append(min(waits))
