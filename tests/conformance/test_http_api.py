"""The JSON API in process (TestClient) on both backends: routes, status codes,
tokens and tenant isolation."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import jobtrail

from ._http_support import auth, client, register

ADM, RD, TA, TAR = auth("adm"), auth("rd"), auth("ta"), auth("tar")


@pytest.fixture
def web(app: jobtrail.App) -> TestClient:
    return client(register(app))


def enqueue(web: TestClient, headers: dict[str, str] = ADM, **body: object) -> dict:
    r = web.post("/api/tasks", json={"kind": "send", **body}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def test_enqueue_new_existing_conflict(web: TestClient) -> None:
    h = {**ADM, "Idempotency-Key": "k1"}
    r = web.post("/api/tasks", json={"kind": "send", "payload": {"a": 1}}, headers=h)
    assert r.status_code == 201
    task = r.json()
    assert task["state"] == "queued" and task["created"] is True
    assert r.headers["Location"] == f"/api/tasks/{task['id']}"
    again = web.post("/api/tasks", json={"kind": "send", "payload": {"a": 1}}, headers=h)
    assert again.status_code == 200 and again.json()["id"] == task["id"]
    assert again.headers["Location"] == f"/api/tasks/{task['id']}"
    clash = web.post("/api/tasks", json={"kind": "send", "payload": {"a": 2}}, headers=h)
    assert clash.status_code == 409 and clash.json()["task_id"] == task["id"]
    assert web.get(r.headers["Location"], headers=RD).json()["payload"] == {"a": 1}


@pytest.mark.parametrize(
    "body,code",
    [
        ({"kind": "nope"}, 422),
        ({"kind": "send", "delay": -1}, 422),
        ({"kind": "send", "delay": 1, "run_at": "2026-01-01T00:00:00Z"}, 422),
        ({"kind": "send", "run_at": "tomorrow"}, 422),
        ({"kind": "send", "queue": " q"}, 422),
        ({"kind": "send", "extra": 1}, 422),
        ({"payload": 1}, 422),
        ({"kind": "send", "payload": "x" * (1024 * 1024 + 10)}, 413),
    ],
)
def test_enqueue_bad_input(web: TestClient, app: jobtrail.App, body: dict, code: int) -> None:
    r = web.post("/api/tasks", json=body, headers=ADM)
    assert r.status_code == code, r.text
    assert "error" in r.json() or "detail" in r.json()
    assert app.list() == []


def test_request_over_the_limit_is_413(web: TestClient) -> None:
    r = web.post(
        "/api/tasks",
        content=b'{"kind": "send", "payload": "' + b"x" * (3 * 1024 * 1024) + b'"}',
        headers={**ADM, "Content-Type": "application/json"},
    )
    assert r.status_code == 413


def test_no_kinds_says_so(store: object, app: jobtrail.App) -> None:
    web = client(app)  # nothing registered, as `serve` without --app
    r = web.post("/api/tasks", json={"kind": "send"}, headers=ADM)
    assert r.status_code == 422
    assert "--app" in r.json()["error"]


def test_read_routes(web: TestClient, app: jobtrail.App) -> None:
    ids = [enqueue(web, payload=i)["id"] for i in range(5)]
    page = web.get("/api/tasks?limit=2", headers=RD).json()
    assert [t["id"] for t in page["tasks"]] == ids[::-1][:2]
    nxt = web.get(f"/api/tasks?limit=2&before={page['next_before']}", headers=RD).json()
    assert [t["id"] for t in nxt["tasks"]] == ids[::-1][2:4]
    assert web.get("/api/tasks?state=queued&kind=send&queue=default", headers=RD).status_code == 200
    assert web.get("/api/tasks?state=bogus", headers=RD).status_code == 422
    assert web.get("/api/tasks?before=x", headers=RD).status_code == 422
    tr = web.get(f"/api/tasks/{ids[0]}/transitions", headers=RD).json()
    assert [t["reason"] for t in tr] == ["enqueued"]
    ex = web.get(f"/api/tasks/{ids[0]}/explain?lang=zh", headers=RD).json()
    assert ex["lang"] == "zh" and ids[0] in ex["text"]
    assert web.get(f"/api/tasks/{ids[0]}/explain?lang=fr", headers=RD).status_code == 422
    for path in ("", "/transitions", "/explain"):
        assert web.get(f"/api/tasks/999999{path}", headers=RD).status_code == 404
        assert web.get(f"/api/tasks/abc{path}", headers=RD).status_code == 404


def test_actions(web: TestClient, app: jobtrail.App) -> None:
    queued = enqueue(web)["id"]
    r = web.post(f"/api/tasks/{queued}/replay", json={"by": "op", "note": "n"}, headers=ADM)
    assert r.status_code == 409 and r.json()["current_state"] == "queued"
    r = web.post(f"/api/tasks/{queued}/receipt", json={"ok": True}, headers=ADM)
    assert r.status_code == 409 and r.json()["current_state"] == "queued"
    r = web.post(f"/api/tasks/{queued}/cancel", json={"by": "op"}, headers=ADM)
    assert r.status_code == 200 and r.json()["outcome"] == "cancelled"
    assert web.post(f"/api/tasks/{queued}/cancel", json={}, headers=ADM).status_code == 422
    dead = enqueue(web, kind="fail")["id"]
    app.run_worker(burst=True, concurrency=1, poll_interval=0.05)
    assert web.get(f"/api/tasks/{dead}", headers=RD).json()["state"] == "dead"
    r = web.post(f"/api/tasks/{dead}/replay", json={"by": "op"}, headers=ADM)
    assert r.status_code == 422 and "note" in r.json()["error"]
    r = web.post(f"/api/tasks/{dead}/replay", json={"by": "op", "note": "fixed"}, headers=ADM)
    assert r.status_code == 200 and r.json()["state"] == "queued"
    assert r.json()["replay_count"] == 1
    assert web.post("/api/tasks/999/cancel", json={"by": "op"}, headers=ADM).status_code == 404


def test_queues_pause_resume(web: TestClient, app: jobtrail.App) -> None:
    enqueue(web)
    body = web.get("/api/queues", headers=RD).json()
    assert {q["queue"] for q in body["queues"]} >= {"default"}
    assert body["stats"]["queues"][0]["counts"]["queued"] == 1
    r = web.post("/api/queues/default/pause", json={"by": "op", "note": "deploy"}, headers=ADM)
    assert r.status_code == 200 and r.json()["paused"] is True
    assert web.post("/api/queues/default/pause", json={"by": "op"}, headers=ADM).status_code == 422
    r = web.post("/api/queues/default/resume", json={"by": "op", "note": "done"}, headers=ADM)
    assert r.json()["paused"] is False
    assert [h["action"] for h in app.queue_history("default")] == ["resume", "pause"]


def test_tokens(web: TestClient, app: jobtrail.App) -> None:
    assert web.get("/api/tasks").status_code == 401
    assert web.get("/api/tasks", headers=auth("nope")).status_code == 401
    assert web.get("/api/tasks", headers={"Authorization": "Basic adm"}).status_code == 401
    assert web.get("/metrics").status_code == 401
    r = web.post("/api/tasks", json={"kind": "send"}, headers=RD)
    assert r.status_code == 403
    assert (
        web.post("/api/queues/default/pause", json={"by": "a", "note": "b"}, headers=RD).status_code
        == 403
    )
    assert app.list() == []
    assert web.get("/metrics", headers=RD).status_code == 200
    assert web.get("/openapi.json").status_code == 200


def test_no_tokens_on_loopback_allows_everything(app: jobtrail.App) -> None:
    web = client(register(app), tokens="")
    assert web.post("/api/tasks", json={"kind": "send"}).status_code == 201
    assert web.get("/metrics").status_code == 200


def test_tenant_isolation(web: TestClient, app: jobtrail.App) -> None:
    other = enqueue(web, tenant="tenantB")["id"]
    mine = enqueue(web, headers=TA)
    assert mine["tenant"] == "tenantA"
    assert enqueue(web, headers=TA, tenant="tenantA")["tenant"] == "tenantA"
    r = web.post("/api/tasks", json={"kind": "send", "tenant": "tenantB"}, headers=TA)
    assert r.status_code == 403
    for h in (TA, TAR):
        listed = web.get("/api/tasks", headers=h).json()["tasks"]
        assert {t["tenant"] for t in listed} == {"tenantA"}
        assert web.get("/api/tasks?tenant=tenantB", headers=h).json()["tasks"] == []
        for path in ("", "/transitions", "/explain"):
            assert web.get(f"/api/tasks/{other}{path}", headers=h).status_code == 404
            assert web.get(f"/api/tasks/{mine['id']}{path}", headers=h).status_code == 200
        assert web.get("/api/queues", headers=h).status_code == 403
        assert web.get("/metrics", headers=h).status_code == 403
    for action, body in (
        ("cancel", {"by": "a"}),
        ("replay", {"by": "a", "note": "b"}),
        ("receipt", {"ok": True}),
    ):
        r = web.post(f"/api/tasks/{other}/{action}", json=body, headers=TA)
        assert r.status_code == 404, (action, r.text)
    assert (
        web.post(f"/api/tasks/{mine['id']}/cancel", json={"by": "a"}, headers=TAR).status_code
        == 403
    )
    assert (
        web.post("/api/queues/default/pause", json={"by": "a", "note": "b"}, headers=TA).status_code
        == 403
    )
    assert app.get(other).state == "queued"
    assert len(app.transitions(other)) == 1
    assert len(web.get("/api/tasks", headers=RD).json()["tasks"]) == 3


def test_metrics(web: TestClient, app: jobtrail.App) -> None:
    enqueue(web)
    enqueue(web, kind="fail")
    app.run_worker(burst=True, concurrency=1, poll_interval=0.05)
    text = web.get("/metrics", headers=RD).text
    assert "jobtrail_up 1.0" in text
    assert 'jobtrail_dead_tasks{kind="fail",queue="default"} 1.0' in text
    assert 'jobtrail_tasks{kind="fail",queue="default",state="dead"} 1.0' in text
    assert "jobtrail_oldest_dead_age_seconds{" in text
    assert 'jobtrail_transitions_window{kind="send",queue="default",reason="completed"' in text
    assert 'jobtrail_queue_paused{queue="default"} 0.0' in text
    assert "jobtrail_run_seconds{" in text


@pytest.mark.parametrize("key", ["", "x" * 256, 42, ["a"]])
def test_enqueue_bad_concurrency_key_is_422(
    web: TestClient, app: jobtrail.App, key: object
) -> None:
    r = web.post("/api/tasks", json={"kind": "send", "concurrency_key": key}, headers=ADM)
    assert r.status_code == 422, r.text
    assert "concurrency_key" in r.text
    assert app.list() == []


def test_enqueue_with_a_concurrency_key(web: TestClient, app: jobtrail.App) -> None:
    first = enqueue(web, concurrency_key="account:42")
    second = enqueue(web, concurrency_key="account:42")
    with app._driver.transaction() as tx:
        rows = [app._driver.task_get(tx, int(t["id"])) for t in (first, second)]
    assert [r["ckey"] for r in rows if r] == ["account:42", "account:42"]
