"""The async API behind PgBouncer in transaction mode (``pooler="transaction"``): no session
settings and no named prepared statements on its async connections either, times still UTC."""

from __future__ import annotations

import asyncio
from datetime import UTC
from pathlib import Path
from typing import Any

from conftest import make_store


def test_aenqueue_and_reads_through_a_transaction_pooler(tmp_path: Path) -> None:
    store = make_store("pgbouncer-tx", tmp_path)
    try:
        app = store.app()
        app.task("k")(lambda ctx, p: None)

        async def go() -> list[Any]:
            made = [await app.aenqueue("k", {"n": i}) for i in range(12)]  # past psycopg's 5
            many = await app.aenqueue_many([{"kind": "k", "payload": i} for i in range(3)])
            read = await app.aget(made[-1].id)
            return [made, many, read, await app.atransitions(read.id)]

        made, many, read, log = asyncio.run(go())
        assert len(made) == 12 and len(many) == 3
        assert read.created_at.tzinfo is UTC and log[0].at.tzinfo is UTC
        assert read.created_at == app.get(read.id).created_at
        assert len(app.list()) == 15
    finally:
        store.close()
