"""The invariant checker (jobtrail.services.check, `jobtrail check`): clean on a healthy store,
and each rule fires on a store corrupted on purpose with raw SQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Store, make_store

import jobtrail

from .support import raw, run_cli


@pytest.fixture
def loose(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A store without the after-test invariant assertion (these tests break it on purpose)."""
    s = make_store(backend, tmp_path)
    try:
        yield s
    finally:
        s.close()


def _app(store: Store) -> jobtrail.App:
    app = store.app()

    @app.task("t")
    def t(ctx: jobtrail.Context, payload: object) -> None:
        return None

    return app


def test_clean_store_has_no_violations(loose: Store) -> None:
    app = _app(loose)
    app.enqueue("t", {"a": 1})
    done = app.enqueue("t", {"a": 2})
    app.enqueue_workflow("flow", children=[("t", {"n": 1}), ("t", {"n": 2})], sequential=True)
    app.cancel(done.id, by="test")
    app.run_worker(burst=True, concurrency=2, poll_interval=0.05)
    assert app.check() == []
    code, out, err = run_cli(["check", "--db", loose.url])
    assert (code, err) == (0, ""), err
    assert out.startswith("ok")


def test_each_rule_fires(loose: Store) -> None:
    app = _app(loose)
    a = app.enqueue("t", {"a": 1})  # state no longer its log's projection
    b = app.enqueue("t", {"b": 1})  # an edge the machine does not have
    c = app.enqueue("t", {"c": 1})  # a queued task with a live lease
    wf = app.enqueue_workflow("flow", children=[("t", {"n": 1})])
    child = app.children(wf.id)[0]
    url = loose.url
    raw(
        url,
        "UPDATE jobtrail_tasks SET state = 'cancelled', finished_at = created_at WHERE id = ?",
        "UPDATE jobtrail_tasks SET state = 'cancelled', finished_at = created_at WHERE id = %s",
        (int(a.id),),
    )
    raw(
        url,
        "INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, "
        "attempt, at) VALUES (?, 3, 'queued', 'succeeded', 'completed', 'x', 0, 0)",
        "INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, "
        "attempt, at) VALUES (%s, 3, 'queued', 'succeeded', 'completed', 'x', 0, now())",
        (int(b.id),),
    )
    raw(
        url,
        "UPDATE jobtrail_tasks SET lease_expires_at = "
        "(julianday('now') - 2440587.5) * 86400.0 + 3600 WHERE id = ?",
        "UPDATE jobtrail_tasks SET lease_expires_at = now() + interval '1 hour' WHERE id = %s",
        (int(c.id),),
    )
    # the parent says succeeded while its only child is still queued (log kept consistent)
    raw(
        url,
        "INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, "
        "attempt, at) VALUES (?, 2, 'waiting', 'succeeded', 'children_succeeded', 'x', 0, 0)",
        "INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, "
        "attempt, at) VALUES (%s, 2, 'waiting', 'succeeded', 'children_succeeded', 'x', 0, "
        "now())",
        (int(wf.id),),
    )
    raw(
        url,
        "UPDATE jobtrail_tasks SET state = 'succeeded', seq = 2, last_reason = "
        "'children_succeeded', finished_at = created_at WHERE id = ?",
        "UPDATE jobtrail_tasks SET state = 'succeeded', seq = 2, last_reason = "
        "'children_succeeded', finished_at = created_at WHERE id = %s",
        (int(wf.id),),
    )
    found = {(v["rule"], v["task_id"]) for v in app.check()}
    assert ("state_is_last_transition", a.id) in found
    assert ("state_is_last_transition", b.id) in found
    assert ("seq_contiguous", b.id) in found
    assert ("log_chain", b.id) not in found  # seq 2 is missing, so no pair to compare
    assert ("edge_allowed", b.id) in found
    assert ("queued_without_lease", c.id) in found
    assert ("parent_aggregate", wf.id) in found
    assert not any(task == child.id for _, task in found)
    for v in app.check():
        assert set(v) >= {"rule", "task_id"}

    code, out, err = run_cli(["check", "--db", url])
    assert code == 1, (out, err)
    assert "edge_allowed" in out and "parent_aggregate" in out
    code, out, _ = run_cli(["check", "--db", url, "--json"])
    assert code == 1 and '"rule"' in out


def test_check_is_read_only(loose: Store) -> None:
    """Running the checker changes nothing (PostgreSQL: inside a READ ONLY transaction)."""
    app = _app(loose)
    task = app.enqueue("t", {})
    before = (app.get(task.id).updated_at, len(app.transitions(task.id)))
    assert app.check() == []
    assert (app.get(task.id).updated_at, len(app.transitions(task.id))) == before
    if loose.postgres:
        from jobtrail.model.machine import State
        from jobtrail.store.base import Move

        with pytest.raises(Exception, match="read-only"):  # noqa: PT011
            with app._driver.transaction(write=False) as tx:
                tx.run("check_read_only")
                app._driver.task_move(
                    tx,
                    Move(
                        int(task.id), State.QUEUED, State.CANCELLED, "cancelled_before_start", "x"
                    ),
                )
