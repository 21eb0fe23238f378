"""Events from outside, in process on both backends: ``POST /api/events`` (admin or the
tenant's token; bad input 4xx naming the field, nothing written) and webhook sources that map a
delivery to an event key (``@app.webhook(source, event_key=fn)``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

import jobtrail

from ._effects_support import burst
from ._http_support import SECRET, auth, client
from .test_webhooks import signed

ADM, RD, TA, TAR = auth("adm"), auth("rd"), auth("ta"), auth("tar")


def waiter(app: jobtrail.App) -> None:
    @app.task("verify")
    def verify(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event(p["key"], timeout=3600)


def waiting(app: jobtrail.App, key: str, tenant: str = "") -> str:
    task = app.enqueue("verify", {"key": key}, tenant=tenant)
    burst(app)
    assert app.get(task.id).state == "waiting"
    return task.id


@pytest.fixture
def web(app: jobtrail.App) -> TestClient:
    waiter(app)
    return client(app)


def test_an_event_over_http_wakes_the_waiting_task(web: TestClient, app: jobtrail.App) -> None:
    task_id = waiting(app, "verified:7")
    r = web.post("/api/events", json={"key": "verified:7", "payload": {"at": "noon"}}, headers=ADM)
    assert r.status_code == 200, r.text
    assert r.json() == {"woken": 1}
    again = web.post("/api/events", json={"key": "verified:7", "payload": 2}, headers=ADM)
    assert again.json() == {"woken": 0}  # a repeat: the first payload wins
    last = app.transitions(task_id)[-1]
    assert (last.reason, last.to_state) == ("event_received", "queued")
    burst(app)
    assert app.get(task_id).result == {"at": "noon"}
    # the payload may be left out: null
    other = waiting(app, "bare")
    assert web.post("/api/events", json={"key": "bare"}, headers=ADM).json() == {"woken": 1}
    burst(app)
    assert app.get(other).state == "succeeded" and app.get(other).result is None


def test_a_tenant_token_sends_only_to_its_tenant(web: TestClient, app: jobtrail.App) -> None:
    mine = waiting(app, "k", tenant="tenantA")
    theirs = waiting(app, "k", tenant="tenantB")
    r = web.post("/api/events", json={"key": "k", "tenant": "tenantB"}, headers=TA)
    assert r.status_code == 403 and "its own tenant" in r.json()["error"]
    assert app.get(theirs).state == "waiting"
    for reader in (RD, TAR):  # read tokens may not act
        assert web.post("/api/events", json={"key": "k"}, headers=reader).status_code == 403
    assert web.post("/api/events", json={"key": "k"}).status_code == 401
    r = web.post("/api/events", json={"key": "k", "payload": "a"}, headers=TA)  # its tenant
    assert r.json() == {"woken": 1}
    assert app.get(mine).state == "queued" and app.get(theirs).state == "waiting"
    r = web.post("/api/events", json={"key": "k", "tenant": "tenantB"}, headers=ADM)
    assert r.json() == {"woken": 1}
    assert app.get(theirs).state == "queued"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "key"),
        ({"key": ""}, "key"),
        ({"key": "k" * 256}, "key"),
        ({"key": 7}, "key"),
        ({"key": "a\x00b"}, "key"),
        ({"key": "k", "tenant": 5}, "tenant"),
        ({"key": "k", "tenant": "t" * 256}, "tenant"),
        ({"key": "k", "payload": "a\x00b"}, "payload"),
        ({"key": "k", "other": 1}, "other"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_writes_nothing(
    web: TestClient, app: jobtrail.App, body: dict[str, Any], field: str
) -> None:
    task_id = waiting(app, "k")
    r = web.post("/api/events", json=body, headers=ADM)
    assert r.status_code == 422, r.text
    assert field in r.json()["error"], r.json()
    assert app.get(task_id).state == "waiting"
    # nothing was stored: the first good event is the one the task gets
    assert app.send_event("k", "good") == 1
    burst(app)
    assert app.get(task_id).result == "good"


def test_a_body_that_is_not_json_is_422(web: TestClient) -> None:
    r = web.post(
        "/api/events", content=b"{key", headers={**ADM, "content-type": "application/json"}
    )
    assert r.status_code == 422


# -- webhook sources that map a delivery to an event ----------------------------------------


def _mail_source(app: jobtrail.App, seen: list[Any], **options: Any) -> None:
    def key(event: Any) -> str | None:
        if event.get("type") == "boom":
            raise KeyError("user")
        return None if event.get("type") == "other" else f"verified:{event['user']}"

    @app.webhook("mail", event_key=key, **options)
    def mail(ctx: jobtrail.Context, event: Any) -> None:
        seen.append(event)


def test_a_webhook_delivery_wakes_the_task_waiting_for_its_event(app: jobtrail.App) -> None:
    waiter(app)
    seen: list[Any] = []
    _mail_source(app, seen)
    web = client(app, secrets=f"mail={SECRET}")
    task_id = waiting(app, "verified:7")
    body = json.dumps({"type": "verified", "user": 7}).encode()
    r = web.post("/webhooks/mail", content=body, headers=signed(body, "m1"))
    assert r.status_code == 202, r.text
    answer = r.json()
    assert answer["event_key"] == "verified:7" and answer["woken"] == 1
    last = app.transitions(task_id)[-1]
    assert (last.reason, last.actor) == ("event_received", "webhook:mail")
    again = web.post("/webhooks/mail", content=body, headers=signed(body, "m1"))
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["woken"] == 0
    burst(app)
    assert app.get(task_id).result == {"type": "verified", "user": 7}  # the delivery's JSON
    assert seen == [{"type": "verified", "user": 7}]  # the source's handler ran once

    # a delivery the mapping names no event for is an ordinary delivery
    other = json.dumps({"type": "other"}).encode()
    r = web.post("/webhooks/mail", content=other, headers=signed(other, "m2"))
    assert r.status_code == 202 and "event_key" not in r.json()


def test_a_failing_event_key_mapping_is_422_and_records_nothing(app: jobtrail.App) -> None:
    waiter(app)
    _mail_source(app, [])
    web = client(app, secrets=f"mail={SECRET}")
    body = json.dumps({"type": "boom"}).encode()
    before = len(app.list())
    r = web.post("/webhooks/mail", content=body, headers=signed(body, "m3"))
    assert r.status_code == 422, r.text
    assert "webhook source 'mail'" in r.json()["error"] and "KeyError" in r.json()["error"]
    assert len(app.list()) == before  # no event task: the delivery was not recorded


def test_a_source_sends_its_events_to_its_tenant(app: jobtrail.App) -> None:
    waiter(app)
    _mail_source(app, [], tenant="acme")
    web = client(app, secrets=f"mail={SECRET}")
    nobody = waiting(app, "verified:9")
    theirs = waiting(app, "verified:9", tenant="acme")
    body = json.dumps({"type": "verified", "user": 9}).encode()
    r = web.post("/webhooks/mail", content=body, headers=signed(body, "m4"))
    assert r.json()["woken"] == 1
    assert app.get(theirs).state == "queued" and app.get(nobody).state == "waiting"


def test_event_key_must_be_a_function(app: jobtrail.App) -> None:
    with pytest.raises(TypeError, match="event_key must be a function"):
        app.webhook("mail", event_key="verified")  # type: ignore[arg-type]
