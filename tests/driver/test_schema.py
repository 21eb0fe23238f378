"""The committed schema of each dialect (``store/migrations/<dialect>/schema.sql``) is what its
migrations build on a fresh store, and the migrations from 0020 on are numbered alike in both
dialects. ``python -m tools.schema`` regenerates the files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from conftest import PG_URL, require_pg

from tools import schema


@pytest.mark.parametrize("dialect", schema.DIALECTS)
def test_the_migrations_reproduce_the_committed_schema(dialect: str) -> None:
    if dialect == "postgres":
        require_pg()
    committed = schema.schema_path(dialect).read_text(encoding="utf-8")
    assert schema.generate(dialect, PG_URL) == committed, (
        f"{dialect}: the migrations no longer build schema.sql; run python -m tools.schema "
        "and commit the difference with the migration"
    )


def test_migrations_from_0020_on_are_numbered_alike_in_both_dialects() -> None:
    sqlite, postgres = (
        {n for n in schema.migration_numbers(d) if n >= schema.ALIKE_FROM} for d in schema.DIALECTS
    )
    assert sqlite, "no migration numbered 0020 or above"
    assert sorted(sqlite - postgres) == [], "SQLite migrations without a PostgreSQL twin"
    assert sorted(postgres - sqlite) == [], "PostgreSQL migrations without a SQLite twin"


def test_the_sqlite_dump_sees_a_new_index(tmp_path: Path) -> None:
    path = tmp_path / "jobtrail.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE jobtrail_x (a INTEGER)")
    conn.commit()
    before = schema.dump_sqlite(path)
    conn.execute("CREATE INDEX jobtrail_x_a ON jobtrail_x (a)")
    conn.commit()
    conn.close()
    after = schema.dump_sqlite(path)
    assert "CREATE TABLE jobtrail_x (a INTEGER);" in before
    assert after == before + "\nCREATE INDEX jobtrail_x_a ON jobtrail_x (a);\n"


def test_the_postgres_dump_sees_a_column_default_and_index() -> None:
    require_pg()
    with schema.fresh_postgres(PG_URL) as name:
        before = schema.dump_postgres(PG_URL, name)
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'ALTER TABLE "{name}".jobtrail_queues ADD COLUMN extra int DEFAULT 7')
            conn.execute(f'CREATE INDEX jobtrail_queues_extra ON "{name}".jobtrail_queues (extra)')
        after = schema.dump_postgres(PG_URL, name)
    assert name not in before and "<schema hash>" in before
    assert "    extra integer DEFAULT 7" in after and "extra" not in before
    assert "CREATE INDEX jobtrail_queues_extra ON jobtrail_queues USING btree (extra);" in after
