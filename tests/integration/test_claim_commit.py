"""Which of the worker's round trips wait for the WAL flush (PostgreSQL, issue 21).

A statement that only claims, and claims only reentrant tasks, commits with
``synchronous_commit`` off for its own transaction: a claim lost in a crash of the server
leaves the task queued, as if its worker had died before starting it, and whatever the attempt
makes durable later commits with a flush that writes the claim first. A statement that carries
completions, or claims a task that is not reentrant (which must never run again unseen), keeps
the session's setting (the operator's, ``on`` by default).

Each statement runs inside a transaction of the test's own, so that the setting it made for its
transaction can be read before the commit (at the commit is when PostgreSQL reads it).
"""

from __future__ import annotations

from typing import Any

from conftest import Store

import jobtrail
from jobtrail.store.types import Claim


def _setting_after(app: jobtrail.App, run: Any, *, session: str | None = None) -> str:
    driver = app._driver
    with driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        if session is not None:
            conn.execute(f"SET LOCAL synchronous_commit = {session}")
        run(driver, tx)
        return str(conn.execute("SELECT current_setting('synchronous_commit')").fetchone()[0])


def _claim(limit: int = 5) -> Claim:
    return Claim(owner="w1", queues=["default"], kinds=["noop"], limit=limit, version=None)


def _app(pg: Store) -> jobtrail.App:
    app = pg.app()

    @app.task("noop")
    def noop(ctx: Any, payload: Any) -> None:
        return None

    @app.task("charge", reentrant=False)
    def charge(ctx: Any, payload: Any) -> None:
        return None

    return app


def test_a_claim_alone_commits_without_waiting_for_the_flush(pg: Store) -> None:
    app = _app(pg)
    app.enqueue_many([{"kind": "noop", "payload": {"i": i}} for i in range(3)])
    claimed: list[Any] = []

    def claim_only(driver: Any, tx: Any) -> None:
        claimed.extend(driver.task_claim_unlimited(tx, _claim()))

    assert _setting_after(app, claim_only) == "off"
    assert len(claimed) == 3

    def claim_only_joined(driver: Any, tx: Any) -> None:  # the round trip with nothing done
        claimed.extend(driver.task_complete_and_claim(tx, [], _claim(), "default", 5)[1])

    app.enqueue("noop", {"i": 3})
    assert _setting_after(app, claim_only_joined) == "off"
    assert len(claimed) == 4
    # an empty queue: nothing claimed, nothing to flush either
    assert _setting_after(app, claim_only) == "off"
    assert app.check() == []


def test_a_claim_of_a_task_that_is_not_reentrant_waits_for_the_flush(pg: Store) -> None:
    app = _app(pg)
    app.enqueue("noop", {})
    app.enqueue("charge", {})
    claimed: list[Any] = []
    both = Claim(owner="w1", queues=["default"], kinds=["noop", "charge"], limit=5, version=None)

    def claim_both(driver: Any, tx: Any) -> None:
        claimed.extend(driver.task_claim_unlimited(tx, both))

    assert _setting_after(app, claim_both) == "on"
    assert sorted(r["kind"] for r in claimed) == ["charge", "noop"]
    assert all("commit_mode" not in r for r in claimed)  # not a column of the task
    app.enqueue("charge", {})

    def claim_joined(driver: Any, tx: Any) -> None:
        claimed.extend(driver.task_complete_and_claim(tx, [], both, "default", 5)[1])

    assert _setting_after(app, claim_joined) == "on"
    assert len(claimed) == 3


def test_a_round_trip_with_completions_waits_for_the_flush(pg: Store) -> None:
    app = _app(pg)
    app.enqueue_many([{"kind": "noop", "payload": {"i": i}} for i in range(4)])
    rows: list[Any] = []

    def claim_two(driver: Any, tx: Any) -> None:
        rows.extend(driver.task_claim_unlimited(tx, _claim(2)))

    _setting_after(app, claim_two)
    attempts = [(int(r["id"]), int(r["attempts"])) for r in rows]
    moved: set[int] = set()

    def complete_and_claim(driver: Any, tx: Any) -> None:
        done, got = driver.task_complete_and_claim(tx, attempts, _claim(2), "default", 2)
        moved.update(done)
        rows.extend(got)

    assert _setting_after(app, complete_and_claim) == "on"
    assert moved == {a[0] for a in attempts}
    assert len(rows) == 4
    # the operator's setting is kept, not replaced by "on"
    more = [(int(r["id"]), int(r["attempts"])) for r in rows[2:]]
    attempts[:] = more
    assert _setting_after(app, complete_and_claim, session="remote_write") == "remote_write"
    assert moved == {int(r["id"]) for r in rows}
    assert {t.state.value for t in app.list(limit=10)} == {"succeeded"}
    assert app.check() == []
