"""``connection=`` with SQLAlchemy 2 (docs/sqlalchemy.md): a ``Connection`` or ``Session`` on
sqlite3 or psycopg 3; the task belongs to that transaction (rollback → no task, commit → a worker
runs it). On both backends, and ``examples/sqlalchemy_app.py`` run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import jobtrail
from jobtrail.model.errors import TaskNotFound

EXAMPLE = Path(__file__).parents[2] / "examples" / "sqlalchemy_app.py"

metadata = MetaData()
notes = Table("sa_notes", metadata, Column("id", Integer, primary_key=True), Column("text", String))


def engine_url(url: str) -> str:
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


@pytest.fixture
def engine(store: Any) -> Iterator[Engine]:
    eng = create_engine(engine_url(store.url))
    metadata.create_all(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def app(store: Any) -> jobtrail.App:
    app = store.app()
    ran: list[Any] = []

    @app.task("note")
    def note(ctx: jobtrail.Context, payload: Any) -> None:
        ran.append(payload)

    app.ran = ran  # type: ignore[attr-defined]
    return app


def count(engine: Engine) -> int:
    with engine.connect() as conn:
        return len(conn.execute(select(notes)).all())


def test_connection_rollback_leaves_nothing(app: jobtrail.App, engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(notes.insert().values(text="lost"))
        task = app.enqueue("note", {"n": 1}, connection=conn)
        conn.rollback()
    with pytest.raises(TaskNotFound):
        app.get(task.id)
    assert count(engine) == 0
    assert app.run_worker(burst=True) == 0


def test_connection_commit_keeps_both_and_the_worker_runs_it(
    app: jobtrail.App, engine: Engine
) -> None:
    with engine.connect() as conn:
        task = app.enqueue("note", {"n": 2}, connection=conn)  # before any statement of ours
        conn.execute(notes.insert().values(text="kept"))
        other = jobtrail.App(app.url)
        try:
            with pytest.raises(TaskNotFound):
                other.get(task.id)  # not visible before the commit
        finally:
            other.close()
        conn.commit()
    assert count(engine) == 1
    assert app.run_worker(burst=True) == 1
    assert app.get(task.id).state.value == "succeeded"
    assert app.ran == [{"n": 2}]  # type: ignore[attr-defined]


def test_engine_begin_block_that_raises_rolls_back(app: jobtrail.App, engine: Engine) -> None:
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(notes.insert().values(text="lost"))
        task = app.enqueue("note", None, connection=conn)
        raise RuntimeError("the request failed")
    with pytest.raises(TaskNotFound):
        app.get(task.id)
    assert count(engine) == 0


def test_session_rollback_and_commit(app: jobtrail.App, engine: Engine) -> None:
    with Session(engine) as session:
        session.execute(notes.insert().values(text="lost"))
        lost = app.enqueue("note", {"n": 3}, connection=session)
        session.rollback()
    with pytest.raises(TaskNotFound):  # (SQLite hands the rolled-back id out again below)
        app.get(lost.id)
    with Session(engine) as session:
        kept = app.enqueue_many(
            [{"kind": "note", "payload": {"n": 4}}, {"kind": "note", "payload": {"n": 5}}],
            connection=session,
        )
        session.execute(notes.insert().values(text="kept"))
        session.commit()
    assert [app.get(t.id).state.value for t in kept] == ["queued", "queued"]
    assert count(engine) == 1
    assert app.run_worker(burst=True) == 2


def test_refusals_name_what_is_wrong_and_write_nothing(app: jobtrail.App, engine: Engine) -> None:
    conn = engine.connect()
    conn.close()
    with pytest.raises(ValueError, match="closed SQLAlchemy Connection"):
        app.enqueue("note", None, connection=conn)
    with pytest.raises(TypeError, match="SQLAlchemy Connection or Session"):
        app.enqueue("note", None, connection=engine)
    with engine.connect() as live:
        live.execute(text("SELECT 1"))
        with pytest.raises(TypeError, match="JSON"):
            app.enqueue("note", {"bad": object()}, connection=live)
        live.commit()
    assert app.list() == []


def test_async_session_is_refused_by_enqueue(app: jobtrail.App) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession

    with pytest.raises(TypeError, match="aenqueue"):
        app.enqueue("note", None, connection=AsyncSession())  # unbound: refused before I/O
    assert app.list() == []


def test_example_runs(store: Any) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), store.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "orders: {'teapot': True}" in done.stdout
    assert "succeeded" in done.stdout
