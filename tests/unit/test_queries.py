"""The SQL loader: named queries, and fragments several queries include."""

from __future__ import annotations

import pytest

from jobtrail.store import queries

TEXT = """
-- fragment: pick
-- the rows to take
    SELECT id FROM t
    WHERE ok

-- name: one
WITH x AS (
    -- include: pick
)
SELECT * FROM x;

-- name: two
SELECT 1;
"""


def test_an_include_line_becomes_the_fragment() -> None:
    got = queries.parse(TEXT)
    assert set(got) == {"one", "two"}  # a fragment is not a query
    assert got["one"] == (
        "WITH x AS (\n-- the rows to take\n    SELECT id FROM t\n    WHERE ok\n)\nSELECT * FROM x;"
    )
    assert got["two"] == "SELECT 1;"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: q\n-- include: nope\n", "no fragment 'nope'"),
        ("-- fragment: a\nx\n-- fragment: a\ny\n-- name: q\nz\n", "fragment 'a' is defined twice"),
        ("-- fragment: a\n-- include: b\n-- fragment: b\nx\n", "fragment 'a' includes another"),
        ("-- name: q\nx\n-- name: q\ny\n", "query 'q' is defined twice"),
    ],
)
def test_bad_sql_files_fail_to_load_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        queries.parse(text)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_every_include_of_the_shipped_sql_is_resolved(dialect: str) -> None:
    loaded = queries.load(dialect)
    assert not [name for name, sql in loaded.items() if "-- include:" in sql]
    if dialect == "postgres":  # the worker's round trip is the two statements it combines
        complete = loaded["task_complete_many"].split("WITH done AS (")[1].split("), log AS")[0]
        assert "UPDATE jobtrail_tasks" in complete
        for suffix in ("", "_fair"):  # the one-tenant claim and its fair twin
            both = loaded["task_complete_and_claim" + suffix]
            claim = loaded["task_claim_unlimited" + suffix]
            gate = claim.split("WITH gate AS (")[1].split("), upd AS")[0]
            claim = claim.split("upd AS (")[1].split("), log AS")[0]
            assert "UPDATE jobtrail_tasks" in claim and claim in both and gate in both
            assert complete in both


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_queries_are_sent_without_comments_and_short_enough_for_psycopgs_cache(
    dialect: str,
) -> None:
    loaded = queries.load(dialect)
    # psycopg converts the placeholders of a query of 4,096 characters or more on every
    # execution (no cache): the worker's round trip must stay below
    assert max(len(sql) for sql in loaded.values()) < 4096
    assert not [n for n, sql in loaded.items() if any(x.startswith("--") for x in sql.split("\n"))]
    assert (
        queries.compact("  SELECT 1\n  -- why\n\n  FROM t  -- kept\n")
        == "SELECT 1\nFROM t  -- kept"
    )
