"""The async half of the SQLAlchemy adapter (``adbapi_connection``, used by ``aenqueue``): an
``AsyncConnection`` or ``AsyncSession`` on psycopg 3 becomes its psycopg ``AsyncConnection``
inside a begun transaction; what it cannot join is refused by name."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from conftest import make_store
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from jobtrail.app.connections import adbapi_connection


@pytest.fixture
def pg_url(tmp_path: Any) -> Any:
    store = make_store("postgres", tmp_path)
    yield "postgresql+psycopg://" + store.url.split("://", 1)[1]
    store.close()


def test_async_connection_and_session_unwrap_to_psycopg(pg_url: str) -> None:
    async def go() -> None:
        engine = create_async_engine(pg_url)
        try:
            async with engine.connect() as conn:
                raw = await adbapi_connection(conn)
                assert isinstance(raw, psycopg.AsyncConnection)
                assert conn.in_transaction()  # begun, as autobegin would
                await conn.execute(text("CREATE TABLE t (x int)"))
                await conn.rollback()
            async with AsyncSession(engine) as session:
                raw = await adbapi_connection(session)
                assert isinstance(raw, psycopg.AsyncConnection)
                assert session.in_transaction()
            closed = engine.connect()
            await closed.start()
            await closed.close()
            with pytest.raises(ValueError, match="closed SQLAlchemy AsyncConnection"):
                await adbapi_connection(closed)
            with pytest.raises(TypeError, match="AsyncConnection or AsyncSession"):
                await adbapi_connection(engine)
        finally:
            await engine.dispose()

    asyncio.run(go())


def test_sync_objects_go_the_sync_way() -> None:
    assert asyncio.run(adbapi_connection(None)) is None
    sentinel = object()
    assert asyncio.run(adbapi_connection(sentinel)) is sentinel


def test_aenqueue_joins_an_async_session_transaction(tmp_path: Any) -> None:
    import jobtrail

    store = make_store("postgres", tmp_path)
    app = store.app()

    @app.task("note")
    def note(ctx: jobtrail.Context, payload: Any) -> None:
        pass

    async def go() -> tuple[str, str]:
        engine = create_async_engine("postgresql+psycopg://" + store.url.split("://", 1)[1])
        try:
            async with AsyncSession(engine) as session:
                lost = await app.aenqueue("note", {"n": 1}, connection=session)
                await session.rollback()
            async with engine.connect() as conn:
                kept = await app.aenqueue("note", {"n": 2}, connection=conn)
                await conn.commit()
            return lost.id, kept.id
        finally:
            await engine.dispose()

    try:
        lost, kept = asyncio.run(go())
        from jobtrail.model.errors import TaskNotFound

        with pytest.raises(TaskNotFound):
            app.get(lost)
        assert app.get(kept).state.value == "queued"
        assert app.run_worker(burst=True) == 1
    finally:
        store.close()
