"""The unflushed twins of the single enqueue's statements (store/postgres/unflushed.py): the
loaded statement with the setting's column added last to its final SELECT, or a loud error
when the statements no longer have the shape the derivation expects."""

from __future__ import annotations

import pytest

from jobtrail.store import queries
from jobtrail.store.postgres.unflushed import UNFLUSHED, unflushed_insert, unflushed_statements

SKIP = "SELECT set_config('synchronous_commit', 'off', true) AS synchronous_commit"


def test_each_twin_is_its_statement_with_the_setting_last_in_its_final_select() -> None:
    loaded = queries.load("postgres")
    assert loaded["skip_flush_wait"] == SKIP
    twins = unflushed_statements(loaded)
    assert set(twins) == set(UNFLUSHED.values())
    for name, twin in UNFLUSHED.items():
        head, _, last = twins[twin].rpartition("\nFROM ins")
        assert head.endswith(",\n" + SKIP.removeprefix("SELECT "))  # after the other columns
        assert twins[twin].replace(",\n" + SKIP.removeprefix("SELECT "), "") == loaded[name]
        assert "\n" not in last and len(twins[twin]) < 4096  # psycopg's cache (test_queries)


@pytest.mark.parametrize(
    "sql",
    [
        "WITH ins AS (INSERT INTO t DEFAULT VALUES RETURNING id)\nSELECT id FROM ins;",
        "WITH ins AS (INSERT INTO t DEFAULT VALUES RETURNING id)\nSELECT id\nFROM ins\nLIMIT 1;",
    ],
)
def test_a_statement_of_another_shape_is_refused(sql: str) -> None:
    with pytest.raises(RuntimeError, match="unflushed.py"):
        unflushed_insert(sql, SKIP)
