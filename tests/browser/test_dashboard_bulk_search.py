"""Search and bulk actions over plain HTTP on SQLite and PostgreSQL: the same answers from both
backends, bad input a 422 naming what is wrong with nothing written, a cross-site bulk post
refused, each task of a bulk action its own audited transition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from dashboard_seed import Seeded, Served, seed
from test_dashboard_pages import fetch

import jobtrail
from jobtrail.model import search


@pytest.fixture
def site(store: object) -> Iterator[tuple[str, Seeded]]:
    seeded = seed(store.app())  # type: ignore[attr-defined]
    served = Served(seeded.app)
    try:
        yield served.url, seeded
    finally:
        served.stop()


def _ids(page: str) -> list[str]:
    import re

    return re.findall(r'<tr class="task-row" data-id="(\d+)"', page)


def test_search_by_payload_error_key_and_tenant(site: tuple[str, Seeded]) -> None:
    url, s = site
    app = s.app
    a = app.enqueue("publish_note", {"order": {"id": 17}, "vip": True}, delay=3600)
    b = app.enqueue("publish_note", {"order": {"id": "17"}, "vip": False}, delay=3600)
    c = app.enqueue("publish_note", {"order": {"id": 18}, "vip": None}, delay=3600, tenant="t9")

    def found(query: str, extra: str = "") -> list[str]:
        status, page, _ = fetch(f"{url}/?q={quote(query)}{extra}")
        assert status == 200, (query, page[-400:])
        return _ids(page)

    assert found("payload.order.id = 17") == [a.id]
    assert found('payload.order.id = "17"') == [b.id]
    assert found("payload.order.id: 18") == [c.id]
    assert found("payload.vip = true") == [a.id]
    assert found("payload.vip = null") == [c.id]
    assert found("payload.order.id = 17", "&state=dead") == []
    assert found("error: TOKEN revoked") == [s.dead]  # case-insensitive substring
    assert found("error: 100%_") == []  # LIKE's wildcards are literal here
    assert found("key: note-42") == [s.keyed]
    assert found("note-42") == [s.keyed]  # bare text: an id or a key
    assert found("tenant: t9") == [c.id]
    assert found(s.dead) == [s.dead]
    for bad in ("payload = 3", "payload.x = [1]", "payload.a.b.c.d.e.f.g.h.i = 1", "id: x"):
        status, page, _ = fetch(f"{url}/?q={quote(bad)}")
        assert status == 422, bad
    assert fetch(f"{url}/?q={quote('a' * 600)}")[0] == 422


def test_bulk_actions_each_task_its_own_transition(site: tuple[str, Seeded]) -> None:
    url, s = site
    app = s.app
    queued = [app.enqueue("publish_note", {"n": i}, delay=3600).id for i in range(3)]
    form = {"action": "cancel", "by": "ann", "note": "incident 7"}
    # refused: from another site, without operator or note, an unknown action, no task
    status, _, _ = fetch(url + "/bulk", {**form, "id": queued[0]}, {"Origin": "http://evil"})
    assert status == 403
    assert fetch(url + "/bulk", {"action": "cancel", "id": queued[0]})[0] == 422
    assert fetch(url + "/bulk", {**form, "action": "delete", "id": queued[0]})[0] == 422
    assert fetch(url + "/bulk", form)[0] == 422
    assert fetch(url + "/bulk", {**form, "id": "1; drop"})[0] == 422
    assert all(app.get(i).state is jobtrail.State.QUEUED for i in queued)
    # all matching the filter: the three queued tasks of kind publish_note
    status, _, headers = fetch(url + "/bulk", {**form, "all": "1", "state": "queued",
                                               "kind": "publish_note"})  # fmt: skip
    assert status == 303
    progress = url + headers["location"]
    deadline = time.monotonic() + 10
    while 'data-finished="yes"' not in (page := fetch(progress)[1]):
        assert time.monotonic() < deadline, page
        time.sleep(0.05)
    for task_id in queued:
        last = app.transitions(task_id)[-1]
        assert (last.reason, last.actor, last.note) == (
            "cancelled_before_start",
            "ann",
            "incident 7",
        )
    # a replay shows the effects first, and replays only the dead among the chosen
    chosen = {"action": "replay", "by": "ann", "note": "fixed the token"}
    status, page, _ = fetch(url + "/bulk", {**chosen, "id": s.dead})
    assert status == 200 and 'id="bulk-confirm"' in page and "submit_body" in page
    assert app.get(s.dead).state is jobtrail.State.DEAD  # nothing yet
    status, _, headers = fetch(url + "/bulk", {**chosen, "id": s.dead, "confirm": "1"})
    assert status == 303
    deadline = time.monotonic() + 10
    while app.get(s.dead).replay_count == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert app.transitions(s.dead)[-1].actor == "ann"
    # the dead-letter page's "select all": every dead task, dismissed one by one
    page = fetch(url + "/dead")[1]
    assert 'id="select-all"' in page and "select all 1 matching the filter" in page
    dismiss = {"action": "dismiss", "by": "ann", "note": "won't fix", "all": "1", "state": "dead"}
    assert fetch(url + "/bulk", dismiss)[0] == 303
    deadline = time.monotonic() + 10
    while not app.get(s.dead_other).dismissed:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert app.transitions(s.dead_other)[-1].reason == "dismissed"
    assert fetch(url + "/bulk/nope")[0] == 404


def test_the_query_parser() -> None:
    term = search.parse("payload.customer.email = a@b.c")
    assert term is not None and term.document() == {"customer": {"email": "a@b.c"}}
    assert term.json_path() == '$."customer"."email"'
    assert search.parse("  ") is None
    assert search.parse("error ~ Timeout") == search.Term("error", "Timeout")
    assert search.parse("idempotency_key = k-1") == search.Term("key", "k-1")
    assert search.parse("just words") == search.Term("text", "just words")
    with pytest.raises(ValueError, match="NUL"):
        search.parse("error: a\x00b")
    with pytest.raises(ValueError, match="compared with ="):
        search.parse("payload.a ~ 1")
