"""Search, the task list and the state counts see a task in every state, both backends (issue
45: no index of the tasks is written by both an enqueue and a claim any more, so each state is
read through its own partial index; PostgreSQL's payload index holds the settled tasks only).

Tasks in six states carry the same payload field; every read must find each of them, newest
first, whatever state filter or page it is asked for."""

from __future__ import annotations

from typing import Any

import pytest

import jobtrail
from jobtrail.store import reads

from .support import claim_as_dead_worker


def _tasks_in_every_state(app: jobtrail.App) -> dict[str, list[str]]:
    @app.task("ok")
    def ok(ctx: jobtrail.Context, payload: dict[str, Any]) -> None:
        return None

    @app.task("bad", max_attempts=1)
    def bad(ctx: jobtrail.Context, payload: dict[str, Any]) -> None:
        raise jobtrail.PermanentError("no")

    app.task("held")(lambda ctx, payload: None)
    ids: dict[str, list[str]] = {}
    ids["succeeded"] = [app.enqueue("ok", {"order": 7, "n": i}).id for i in range(3)]
    ids["dead"] = [app.enqueue("bad", {"order": 7}).id for _ in range(2)]
    app.run_worker(burst=True)
    ids["leased"] = [app.enqueue("held", {"order": 7}).id for _ in range(3)]
    for _ in ids["leased"]:
        assert len(claim_as_dead_worker(app, "held")) == 1
    asked = ids["leased"].pop()
    app.cancel(asked, by="ops")  # held by a worker: cancel_requested
    ids["cancel_requested"] = [asked]
    ids["cancelled"] = [app.enqueue("ok", {"order": 7}, delay=600).id]
    app.cancel(ids["cancelled"][0], by="ops")
    ids["queued"] = [app.enqueue("ok", {"order": 7}, delay=600).id for _ in range(3)]
    ids["other"] = [app.enqueue("ok", {"order": 8}, delay=600).id]  # never found by order 7
    for state, wanted in ids.items():
        assert {app.get(i).state.value for i in wanted} == {state.replace("other", "queued")}
    return ids


def _newest_first(ids: list[str]) -> list[str]:
    return sorted(ids, key=int, reverse=True)


def test_every_state_is_searched_listed_and_counted(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _tasks_in_every_state(app)
    other = ids.pop("other")
    every = _newest_first([i for wanted in ids.values() for i in wanted])
    found = app.search("payload.order = 7")
    assert [t.id for t in found["tasks"]] == every
    # one page after another: the same tasks in the same order
    pages: list[str] = []
    before = None
    while True:
        page = app.search("payload.order = 7", limit=4, before=before)["tasks"]
        if not page:
            break
        pages += [t.id for t in page]
        before = page[-1].id
    assert pages == every
    selection = app.search_states("payload.order = 7")
    assert selection["ids"] == every and not selection["more"]
    assert selection["states"] == {state: len(wanted) for state, wanted in ids.items()}
    for state, wanted in ids.items():
        got = app.search("payload.order = 7", state=state)["tasks"]
        assert [t.id for t in got] == _newest_first(wanted), state
        in_state = _newest_first(wanted + (other if state == "queued" else []))
        assert [t.id for t in app.search("", state=state)["tasks"]] == in_state
        assert [t.id for t in app.list(state=state)] == in_state, state
        assert [t.id for t in app.list(state=state, limit=1)] == in_state[:1]
    queued = _newest_first(ids["queued"] + other)
    assert [t.id for t in app.list(state="queued", kind="ok")] == queued
    assert [t.id for t in app.list(state="queued", limit=2, before=queued[0])] == queued[1:3]
    # a page of queued tasks that the newest ids do not fill reads every queued task
    monkeypatch.setattr(reads, "QUEUED_WINDOW", 2)
    assert [t.id for t in app.list(state="queued", limit=1)] == queued[:1]  # found in the window
    assert [t.id for t in app.list(state="queued")] == queued
    assert [t.id for t in app.list(state="queued", limit=2, before=queued[0])] == queued[1:3]
    assert app.list(state="queued", kind="held") == []
    assert [t.id for t in app.list(state="leased", kind="held")] == _newest_first(ids["leased"])
    counts = app.state_counts()
    assert (counts["queued"], counts["leased"], counts["cancel_requested"]) == (4, 2, 1)
    assert counts["dead"] == 2
    bounded = app.state_counts(upto=2)
    assert (bounded["queued"], bounded["leased"], bounded["cancel_requested"]) == (2, 2, 1)
    queues = {(q["queue"], q["kind"]): q["counts"] for q in app.stats()["queues"]}
    assert queues[("default", "ok")]["queued"] == 4
    assert queues[("default", "held")]["leased"] == 2
    assert queues[("default", "held")]["cancel_requested"] == 1
