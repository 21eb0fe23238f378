"""The PostgreSQL schemas the tests' stores live in, one per test.

Migrating a new schema (18 migrations: ~120 ms of the server's work on a quiet machine, twice
that under CI's load) and dropping it again were the largest part of a PostgreSQL test's setup,
and with autovacuum off (as on these machines) every create and drop left dead rows in the
system catalogs that made each new connection and catalog read slower as a run went on. So a
process keeps the schemas its tests migrated: when a test ends, a schema that is still exactly
what the migrations made (``fingerprint``: its tables, columns, indexes, constraints,
functions, triggers and applied migrations) is emptied (``TRUNCATE`` of every table that is no
longer the size it had when new, so no dead rows or pages are left for the planner to see, and
every sequence restarted) and handed to the next test whose first act is ``store.app()``. A
test that reads the store's URL first gets a new, empty schema as before (the CLI's
``migrate``, ``SchemaMissing``); one that changed the schema's shape has it dropped. Every few
hundred tests the catalogs are vacuumed (``.ci/run`` also compacts them before it starts).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

import jobtrail

#: Spare schemas a process keeps at most.
SPARE = 8
#: A schema is dropped after this many tests rather than reused again.
USES = 50
#: Vacuum the system catalogs after this many schemas this process dropped or emptied (a
#: ``TRUNCATE`` gives each table and index a new file: a new row version in ``pg_class``).
VACUUM_EVERY = 200
CATALOGS = (
    "pg_class",
    "pg_attribute",
    "pg_depend",
    "pg_constraint",
    "pg_index",
    "pg_type",
    "pg_attrdef",
    "pg_trigger",
    "pg_proc",
    "pg_namespace",
)

FINGERPRINT = """
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %(schema)s)
SELECT md5(string_agg(x, ',' ORDER BY x)) FROM (
  SELECT c.relname || ':' || c.relkind::text || ':' || c.relnatts::text AS x
    FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns)
  UNION ALL
  SELECT i.indexrelid::regclass::text || ':' || i.indkey::text || ':' || i.indisunique::text
         || ':' || coalesce(i.indpred::text, '') || coalesce(i.indexprs::text, '')
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
   WHERE c.relnamespace = (SELECT oid FROM ns)
  UNION ALL
  SELECT a.attrelid::regclass::text || '.' || a.attname || ':' || a.atttypid::text || ':'
         || a.attnotnull::text || ':' || a.atthasdef::text
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
   WHERE c.relnamespace = (SELECT oid FROM ns) AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT co.conname || ':' || co.contype::text || ':' || coalesce(co.conkey::text, '')
    FROM pg_constraint co WHERE co.connamespace = (SELECT oid FROM ns)
  UNION ALL
  SELECT p.proname || ':' || md5(p.prosrc) FROM pg_proc p
   WHERE p.pronamespace = (SELECT oid FROM ns)
  UNION ALL
  SELECT t.tgname || ':' || t.tgrelid::regclass::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = (SELECT oid FROM ns)
) q
"""

SIZES = """
SELECT c.relname, c.relkind::text, pg_total_relation_size(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'S')
"""


class Schemas:
    """This process's schemas on the database at ``admin_url``."""

    def __init__(self, admin_url: str, url_for: Callable[[str], str]) -> None:
        self.admin_url = admin_url
        self.url_for = url_for  # the URL of an App on a schema
        self.spare: list[str] = []
        self.uses: dict[str, int] = {}
        #: what a freshly migrated schema looks like (set from the first one)
        self.template: str | None = None
        self.template_sizes: dict[str, int] = {}
        self.released = 0

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.admin_url, autocommit=True)

    def new(self) -> str:
        """A new, empty schema."""
        schema = "t_" + secrets.token_hex(6)
        with self._connect() as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        self.uses[schema] = 0
        return schema

    def take_migrated(self) -> str:
        """An emptied, migrated schema of this process's, or a new one migrated (the first is
        what ``release`` compares the used ones with)."""
        if self.spare:
            return self.spare.pop()
        schema = self.new()
        app = jobtrail.App(self.url_for(schema))
        try:
            app.migrate()
        finally:
            app.close()
        if self.template is None:
            with self._connect() as conn:
                self.template = self._fingerprint(conn, schema)
                self.template_sizes = {
                    name: size for name, _kind, size in conn.execute(SIZES, {"schema": schema})
                }
        return schema

    def release(self, schema: str) -> None:
        """The test on ``schema`` ended: keep it emptied for another, or drop it."""
        self.uses[schema] = self.uses.get(schema, 0) + 1
        self.released += 1
        with self._connect() as conn:
            if (
                self.template is not None
                and len(self.spare) < SPARE
                and self.uses[schema] < USES
                and self._fingerprint(conn, schema) == self.template
            ):
                self._empty(conn, schema)
                self.spare.append(schema)
            else:
                self._drop(conn, schema)
            if self.released % VACUUM_EVERY == 0:
                vacuum_catalogs(conn)

    def close(self) -> None:
        """Drop the spare schemas (the end of the session)."""
        if not self.spare:
            return
        with self._connect() as conn:
            while self.spare:
                self._drop(conn, self.spare.pop())

    def _fingerprint(self, conn: psycopg.Connection[Any], schema: str) -> str | None:
        row = conn.execute(FINGERPRINT, {"schema": schema}).fetchone()
        if row is None or row[0] is None:
            return None
        versions = conn.execute(
            sql.SQL("SELECT string_agg(version::text, ',' ORDER BY version) FROM {}").format(
                sql.Identifier(schema, "jobtrail_migrations")
            )
        ).fetchone()
        return f"{row[0]}/{versions[0] if versions else ''}"

    def _empty(self, conn: psycopg.Connection[Any], schema: str) -> None:
        tables, sequences = [], []
        for name, kind, size in conn.execute(SIZES, {"schema": schema}):
            if kind == "S":
                sequences.append(name)
            elif name != "jobtrail_migrations" and size != self.template_sizes.get(name):
                tables.append(name)
        with conn.transaction():
            if tables:
                conn.execute(
                    sql.SQL("TRUNCATE {} CASCADE").format(
                        sql.SQL(", ").join(sql.Identifier(schema, t) for t in tables)
                    )
                )
            for name in sequences:
                conn.execute(
                    sql.SQL("ALTER SEQUENCE {} RESTART").format(sql.Identifier(schema, name))
                )

    def _drop(self, conn: psycopg.Connection[Any], schema: str) -> None:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        self.uses.pop(schema, None)


def vacuum_catalogs(conn: psycopg.Connection[Any]) -> None:
    """``VACUUM`` the system catalogs that creating and dropping schemas fills with dead rows
    (autovacuum is off on these machines)."""
    conn.execute(
        sql.SQL("VACUUM {}").format(
            sql.SQL(", ").join(sql.Identifier("pg_catalog", c) for c in CATALOGS)
        )
    )
