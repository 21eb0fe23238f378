"""One line per outage (store/outage.py): the notice's words and timing, on a
clock the test moves; and the filter that keeps psycopg_pool's records about jobtrail's
pools out of the log."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from jobtrail.store import outage
from jobtrail.store.outage import OutageNotice, quiet_pool_logs, where


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_800_000_000.0 + self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(outage, "time", fake)
    return fake


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.levelname} {r.getMessage()}" for r in caplog.records if r.name == "jobtrail.store"]


def test_one_warning_a_reminder_a_minute_and_one_info_when_back(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobtrail.store")
    notice = OutageNotice("the database at db.internal:5432")
    notice.answered()  # nothing to say while the store answers
    for _ in range(50):  # claims, sweeps, pool attempts: one line for all of them
        notice.failed(ConnectionError("connection refused\nIs the server running?"))
        clock.now += 1.0
    assert notice.down
    said = lines(caplog)
    assert len(said) == 1 and said[0].startswith("WARNING store unreachable: the database at ")
    assert "db.internal:5432 has not answered since " in said[0] and "UTC" in said[0]
    assert "ConnectionError: connection refused" in said[0] and "retrying" in said[0]
    assert "\n" not in said[0]
    clock.now += 15.0  # a minute since the first line: one reminder
    notice.failed("connection refused")
    notice.failed("connection refused")
    said = lines(caplog)
    assert len(said) == 2 and said[1].startswith("WARNING store still unreachable: ")
    assert "for 65.0s now" in said[1]
    clock.now += 0.5
    notice.answered()  # the first answer; a failure just before: not yet back
    clock.now += 0.3
    notice.answered()
    assert len(lines(caplog)) == 2 and notice.down
    clock.now += 1.0
    notice.answered()  # a second without a failure since: back, timed from the first answer
    said = lines(caplog)
    back = "INFO store back: the database at db.internal:5432 answers again after 65.5s away"
    assert said[2] == back
    assert not notice.down
    notice.answered()
    assert len(lines(caplog)) == 3


def test_a_failure_among_the_first_answers_keeps_the_outage_open(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobtrail.store")
    notice = OutageNotice("the pooler at 127.0.0.1:6433")
    notice.answered()
    notice.failed("refused")
    clock.now += 2.0
    notice.answered()
    clock.now += 0.2
    notice.failed("the database system is starting up")  # a connection begun while away
    clock.now += 1.5
    notice.answered()  # answers again, but not yet for a second without a failure
    assert len(lines(caplog)) == 1 and notice.down
    clock.now += 1.0
    notice.answered()
    said = lines(caplog)
    assert len(said) == 2  # one WARNING, one INFO: the flap is not a second outage
    assert said[1] == "INFO store back: the pooler at 127.0.0.1:6433 answers again after 3.7s away"


def test_where() -> None:
    assert where("10.0.0.5", "6433", pooler=True) == "the pooler at 10.0.0.5:6433"
    assert where("db", None, pooler=False) == "the database at db:5432"
    assert where("", None, pooler=False) == "the database at the local socket, port 5432"


def test_the_pool_filter_drops_records_about_our_pools_only() -> None:
    quiet_pool_logs()
    quiet_pool_logs()  # once is enough
    pool_log = logging.getLogger("psycopg.pool")
    assert len([f for f in pool_log.filters if isinstance(f, type(outage._FILTER))]) == 1

    class Conn:
        def __init__(self, name: str) -> None:
            self._pool: Any = type("P", (), {"name": name})()

    def record(msg: str, args: tuple[Any, ...], thread: str = "MainThread") -> logging.LogRecord:
        rec = logging.LogRecord("psycopg.pool", logging.INFO, __file__, 1, msg, args, None)
        rec.threadName = thread
        return rec

    keep = outage._FILTER.filter
    assert not keep(record("connection requested from %r", ("jobtrail",)))
    assert not keep(record("error connecting in %r: %s", ("jobtrail-async", "refused")))
    assert not keep(record("discarding closed connection: %s", (Conn("jobtrail"),)))
    assert not keep(record("adding new connection to the pool", (), "jobtrail-worker-0"))
    assert keep(record("connection requested from %r", ("billing",)))
    assert keep(record("discarding closed connection: %s", (Conn("billing"),)))
    assert keep(record("adding new connection to the pool", (), "billing-worker-0"))


def test_a_store_that_never_answered_is_not_an_outage(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A refused connection at start is the caller's error (the CLI's one line), not a
    WARNING before it."""
    caplog.set_level(logging.INFO, logger="jobtrail.store")
    notice = OutageNotice("the database at db:5432")
    notice.failed('FATAL: database "shop" does not exist')
    assert lines(caplog) == [] and not notice.down
    notice.answered()
    notice.failed("refused")
    assert len(lines(caplog)) == 1 and notice.down
