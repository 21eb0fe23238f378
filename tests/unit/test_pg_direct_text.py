"""The pieces of ``store.pg_direct`` that need no server: placeholder numbering and the text
form of parameters (the server side is in tests/integration/test_pg_direct.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobtrail.store import queries
from jobtrail.store.postgres.direct import DirectStatement, positional, text_value


def test_placeholders_are_numbered_in_order_of_first_use() -> None:
    text, names = positional("SELECT %(b)s, %(a)s, %(b)s::int, 10 %% 3, %(c)s")
    # a name used twice keeps its number; %% is a literal % (as psycopg reads it)
    assert text == "SELECT $1, $2, $1::int, 10 % 3, $3"
    assert names == ("b", "a", "c")


def test_the_insert_statement_numbers_every_parameter_the_driver_binds() -> None:
    statement = DirectStatement("x", queries.load("postgres")["task_insert"])
    assert b"%(" not in statement.text
    assert set(statement.names) == {
        "kind", "queue", "tenant", "state", "payload", "payload_hash", "idempotency_key",
        "priority", "max_attempts", "lease_seconds", "reentrant", "run_at", "delay",
        "parent_id", "actor", "data",
    }  # fmt: skip
    params = dict.fromkeys(statement.names, "v")
    assert statement.values(params) == [b"v"] * len(statement.names)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        (True, b"t"),  # a bool is an int to Python: it must not become 1
        (False, b"f"),
        (0, b"0"),
        (-(2**63), b"-9223372036854775808"),
        (0.1, b"0.1"),  # repr: the shortest text that reads back as the same float
        (1e-05, b"1e-05"),
        (2.5e16, b"2.5e+16"),
        ("ü\u2028x", "ü\u2028x".encode()),
        (
            datetime(2024, 2, 29, 23, 59, 59, 1, tzinfo=timezone(timedelta(hours=-3))),
            b"2024-02-29T23:59:59.000001-03:00",
        ),
        (datetime(2024, 1, 1, tzinfo=UTC), b"2024-01-01T00:00:00+00:00"),
    ],
)
def test_text_form_of_parameters(value: object, text: bytes | None) -> None:
    assert text_value(value) == text


def test_values_libpq_cannot_carry_are_refused() -> None:
    # libpq reads text parameters up to their first NUL: such text must never be sent this way
    with pytest.raises(ValueError, match="NUL"):
        text_value("a\x00b")
    statement = DirectStatement("x", "SELECT %(a)s")
    with pytest.raises(ValueError, match="NUL"):
        statement.values({"a": "a\x00b"})
    with pytest.raises(ValueError, match="timezone-aware"):
        text_value(datetime(2024, 1, 1))
    with pytest.raises(TypeError, match="bytes"):
        text_value(b"raw")
