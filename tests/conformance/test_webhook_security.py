"""Webhook kinds on both backends: only the webhook route makes webhook tasks, and a receipt is
confirmed or failed only within the tenant of the task it belongs to.

The finding these tests pin down: any admin token, a tenant-bound one too, could
``POST /api/tasks`` a task of kind ``webhook.<source>``; when it ran, its ``receipt`` mapping
confirmed (or failed) whatever receipt its payload named — another tenant's included.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import psycopg
import pytest

import jobtrail
from jobtrail import TaskNotFound

from ._effects_support import burst
from ._http_support import SECRET, auth, client, register
from .test_webhooks import signed

ROUTE = r"webhook tasks are made only by POST /webhooks/pay"


def refusal(kind: str = "webhook.pay") -> str:
    return rf"'{kind}'.*{ROUTE}" if kind == "webhook.pay" else rf"'{kind}'"


# -- only the webhook route creates webhook tasks ----------------------------------------------


@pytest.fixture
def wapp(app: jobtrail.App) -> jobtrail.App:
    return register(app)


def test_enqueue_refuses_a_webhook_kind_and_stores_nothing(wapp: jobtrail.App) -> None:
    for options in ({}, {"idempotency_key": "k1"}, {"tenant": "tenantA"}, {"delay": 5}):
        with pytest.raises(ValueError, match=refusal()):
            wapp.enqueue("webhook.pay", {"receipt": "r"}, **options)
    # a webhook kind with no handler is refused for the same reason, not as unknown
    with pytest.raises(ValueError, match=r"'webhook.nope'.*POST /webhooks/nope"):
        wapp.enqueue("webhook.nope")
    assert wapp.list() == []


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
@pytest.mark.parametrize("where", [0, 1, "later batch"])
def test_enqueue_many_refuses_a_webhook_item_and_stores_nothing(
    wapp: jobtrail.App, keyed: bool, where: int | str
) -> None:
    """Both item formats: the plain bulk path (kind and payload only) and the general one
    (idempotency keys, tenants…), the webhook item first, second or in a later batch."""
    n = wapp._driver.insert_batch + 5 if where == "later batch" else 3
    at = n - 2 if where == "later batch" else int(where)
    items: list[dict[str, Any]] = []
    for i in range(n):
        item: dict[str, Any] = {"kind": "send", "payload": {"n": i}}
        if keyed:
            item["idempotency_key"] = f"k{i}"
        items.append(item)
    items[at] = {**items[at], "kind": "webhook.pay"}
    with pytest.raises(ValueError, match=rf"item {at}: .*{refusal()}"):
        wapp.enqueue_many(items)
    assert wapp.list() == []


def test_enqueue_many_refuses_a_webhook_item_given_as_a_mapping(wapp: jobtrail.App) -> None:
    from types import MappingProxyType

    with pytest.raises(ValueError, match=rf"item 1: .*{refusal()}"):
        wapp.enqueue_many([{"kind": "send"}, MappingProxyType({"kind": "webhook.pay"})])
    assert wapp.list() == []


def _caller_connection(store: Any) -> Any:
    if store.backend == "sqlite":
        return sqlite3.connect(store.url[len("sqlite:///") :])
    return psycopg.connect(store.url)


@pytest.mark.parametrize("how", ["enqueue", "enqueue_many", "enqueue_many keyed", "workflow"])
def test_refused_on_the_callers_connection_too(store: Any, wapp: jobtrail.App, how: str) -> None:
    """Within ``connection=`` the refusal comes before anything is written, and the caller's
    own transaction goes on: what it commits holds its work and none of the refused call."""
    with closing(_caller_connection(store)) as conn:
        conn.execute("CREATE TABLE shop_orders (id INTEGER PRIMARY KEY)")
        conn.commit()
        conn.execute("INSERT INTO shop_orders (id) VALUES (1)")
        kept = wapp.enqueue("send", {"order": 1}, connection=conn)
        with pytest.raises(ValueError, match=refusal()):
            if how == "enqueue":
                wapp.enqueue("webhook.pay", {"x": 1}, connection=conn)
            elif how == "workflow":
                wapp.enqueue_workflow("flow", [("send", {}), ("webhook.pay", {})], connection=conn)
            else:
                key = {"idempotency_key": "w"} if how.endswith("keyed") else {}
                many = [{"kind": "send"}, {"kind": "webhook.pay", **key}]
                wapp.enqueue_many(many, connection=conn)
        conn.execute("INSERT INTO shop_orders (id) VALUES (2)")
        conn.commit()
        assert [r[0] for r in conn.execute("SELECT id FROM shop_orders ORDER BY id")] == [1, 2]
        conn.commit()
    assert [t.id for t in wapp.list()] == [kept.id]


def test_a_workflow_may_not_hold_or_be_a_webhook_task(wapp: jobtrail.App) -> None:
    with pytest.raises(ValueError, match=rf"workflow child 1: .*{refusal()}"):
        wapp.enqueue_workflow("flow", [("send", {}), ("webhook.pay", {})])
    with pytest.raises(ValueError, match=refusal()):
        wapp.enqueue_workflow("webhook.pay", [("send", {})])  # the parent is a label: refused too
    assert wapp.list() == []


def test_the_webhook_route_still_makes_its_task(wapp: jobtrail.App) -> None:
    body = json.dumps({"type": "invoice.paid"}).encode()
    delivery = wapp.receive_webhook("pay", "msg_1", body)
    assert delivery.task_id is not None and not delivery.duplicate
    task = wapp.get(delivery.task_id)
    assert (task.kind, task.tenant, task.state) == ("webhook.pay", "", "queued")
    burst(wapp)
    assert wapp.get(delivery.task_id).state == "succeeded"


def test_api_refuses_a_webhook_kind_for_every_admin_token(wapp: jobtrail.App) -> None:
    web = client(wapp)
    for token in ("adm", "ta"):
        r = web.post("/api/tasks", json={"kind": "webhook.pay", "payload": {}}, headers=auth(token))
        assert r.status_code == 422, r.text
        assert "webhook.pay" in r.json()["error"]
        assert "POST /webhooks/pay" in r.json()["error"]
    assert wapp.list() == []


# -- receipts stay within the tenant of the task that owns them --------------------------------


def register_awaiting(app: jobtrail.App, kind: str = "submit") -> None:
    @app.task(kind, backoff_base=0)
    def submit(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.await_receipt(payload["receipt"], timeout=600)


def awaiting(app: jobtrail.App, receipt: str, tenant: str, kind: str = "submit") -> str:
    task = app.enqueue(kind, {"receipt": receipt}, tenant=tenant)
    burst(app)
    assert app.get(task.id).state == "awaiting_receipt"
    return task.id


def untouched(app: jobtrail.App, task_id: str) -> None:
    task = app.get(task_id)
    assert (task.state, task.last_reason) == ("awaiting_receipt", "submitted")


def receipt_source(app: jobtrail.App, source: str, **options: Any) -> None:
    @app.webhook(
        source, receipt=lambda e: (e["receipt"], e["ok"], e.get("category"), None), **options
    )
    def handler(ctx: Any, event: Any) -> None:
        return None


def deliver(app: jobtrail.App, source: str, msg: str, **event: Any) -> str:
    delivery = app.receive_webhook(source, msg, json.dumps({"type": "receipt", **event}).encode())
    assert delivery.task_id is not None
    burst(app)
    return delivery.task_id


@pytest.mark.parametrize("ok", [True, False], ids=["confirm", "fail"])
def test_an_untenanted_source_cannot_settle_a_tenants_receipt(app: jobtrail.App, ok: bool) -> None:
    """The source has no tenant, so its events have none: the receipt of a task of tenant
    ``acme`` is out of their reach, exactly as if it did not exist."""
    register_awaiting(app)
    receipt_source(app, "prov")
    theirs = awaiting(app, "rcpt-acme", "acme")
    event_id = deliver(app, "prov", "m1", receipt="rcpt-acme", ok=ok, category="invalid_input")
    untouched(app, theirs)
    event = app.get(event_id)
    assert (event.state, event.tenant) == ("dead", "")
    assert "receipt rcpt-acme" in (event.last_error or "")
    # an untenanted task is within its reach
    ours = awaiting(app, "rcpt-ours", "")
    deliver(app, "prov", "m2", receipt="rcpt-ours", ok=ok, category="invalid_input")
    assert app.get(ours).state == ("succeeded" if ok else "dead")
    untouched(app, theirs)


def test_a_tenants_source_settles_only_its_tenants_receipts(app: jobtrail.App) -> None:
    register_awaiting(app)
    receipt_source(app, "prov-acme", tenant="acme")
    mine = awaiting(app, "rcpt-1", "acme")
    other = awaiting(app, "rcpt-2", "globex")
    plain = awaiting(app, "rcpt-3", "")
    for receipt in ("rcpt-2", "rcpt-3"):
        event_id = deliver(app, "prov-acme", f"m-{receipt}", receipt=receipt, ok=True)
        assert app.get(event_id).state == "dead"
    untouched(app, other)
    untouched(app, plain)
    event_id = deliver(app, "prov-acme", "m-1", receipt="rcpt-1", ok=True)
    event = app.get(event_id)
    assert (event.state, event.tenant) == ("succeeded", "acme")
    done = app.get(mine)
    assert (done.state, done.last_reason) == ("succeeded", "receipt_confirmed")
    assert app.transitions(mine)[-1].actor == "webhook:prov-acme"


def test_a_source_tenant_is_checked_when_registered(app: jobtrail.App) -> None:
    for bad in (None, 3, "x" * 256, "a\x00b"):
        with pytest.raises((TypeError, ValueError), match="tenant"):
            app.webhook("pay", tenant=bad)  # type: ignore[arg-type]


def test_a_signed_delivery_settles_within_the_sources_tenant(app: jobtrail.App) -> None:
    """Through the HTTP route: the event task carries the source's tenant."""
    register_awaiting(app)
    receipt_source(app, "prov", tenant="tenantA")
    mine = awaiting(app, "rcpt-a", "tenantA")
    other = awaiting(app, "rcpt-b", "tenantB")
    web = client(app, secrets=f"prov={SECRET}")
    for msg, receipt in (("m1", "rcpt-b"), ("m2", "rcpt-a")):
        body = json.dumps({"type": "receipt", "receipt": receipt, "ok": True}).encode()
        r = web.post("/webhooks/prov", content=body, headers=signed(body, msg))
        assert r.status_code == 202, r.text
        assert app.get(r.json()["task_id"]).tenant == "tenantA"
    burst(app)
    untouched(app, other)
    assert app.get(mine).state == "succeeded"


def test_confirm_receipt_within_a_tenant(app: jobtrail.App) -> None:
    register_awaiting(app)
    theirs = awaiting(app, "rcpt-1", "globex")
    for call in (
        lambda: app.confirm_receipt(receipt_id="rcpt-1", tenant="acme"),
        lambda: app.confirm_receipt(receipt_id="rcpt-1", tenant=""),
        lambda: app.confirm_receipt(theirs, tenant="acme"),
        lambda: app.confirm_receipt(theirs, ok=False, category="invalid_input", tenant="acme"),
    ):
        with pytest.raises(TaskNotFound):
            call()
        untouched(app, theirs)
    # the same message as an id that does not exist: it never says that the task is there
    with pytest.raises(TaskNotFound) as wrong_tenant:
        app.confirm_receipt(receipt_id="rcpt-1", tenant="acme")
    with pytest.raises(TaskNotFound) as unknown:
        app.confirm_receipt(receipt_id="rcpt-1x", tenant="acme")
    assert str(wrong_tenant.value).replace("rcpt-1", "?") == str(unknown.value).replace(
        "rcpt-1x", "?"
    )
    done = app.confirm_receipt(receipt_id="rcpt-1", tenant="globex")
    assert done.state == "succeeded"
    # no tenant given: the application's own call, which may settle any tenant's receipt
    other = awaiting(app, "rcpt-2", "initech")
    assert app.confirm_receipt(receipt_id="rcpt-2").state == "succeeded"
    assert app.get(other).state == "succeeded"


def test_one_receipt_id_in_two_tenants_is_settled_in_the_callers(app: jobtrail.App) -> None:
    """Two kinds' providers handed out the same id to two tenants: naming the tenant picks the
    task (no "awaited by several tasks" refusal), and only that one moves."""
    register_awaiting(app, "submit")
    register_awaiting(app, "submit2")
    a = awaiting(app, "rcpt-same", "acme", "submit")
    b = awaiting(app, "rcpt-same", "globex", "submit2")
    done = app.confirm_receipt(receipt_id="rcpt-same", tenant="globex")
    assert done.id == b and done.state == "succeeded"
    untouched(app, a)


def test_api_receipt_of_another_tenants_task_is_404(app: jobtrail.App) -> None:
    register_awaiting(app)
    theirs = awaiting(app, "rcpt-1", "tenantB")
    web = client(app)
    r = web.post(f"/api/tasks/{theirs}/receipt", json={"ok": True}, headers=auth("ta"))
    assert r.status_code == 404, r.text
    untouched(app, theirs)
    mine = awaiting(app, "rcpt-2", "tenantA")
    r = web.post(f"/api/tasks/{mine}/receipt", json={"ok": True}, headers=auth("ta"))
    assert r.status_code == 200 and r.json()["state"] == "succeeded"


def test_one_kinds_receipt_id_may_be_awaited_in_two_tenants(app: jobtrail.App) -> None:
    """One provider (one kind) serving two tenants may hand both the same receipt id: both
    tasks await it, each tenant settles only its own, and without a tenant the ambiguity is a
    clear refusal that moves nothing."""
    register_awaiting(app)
    a = awaiting(app, "rcpt-same", "acme")
    b = awaiting(app, "rcpt-same", "globex")
    with pytest.raises(ValueError, match="several tasks"):
        app.confirm_receipt(receipt_id="rcpt-same")
    untouched(app, a)
    untouched(app, b)
    assert app.confirm_receipt(receipt_id="rcpt-same", tenant="acme").id == a
    assert app.get(a).state == "succeeded"
    untouched(app, b)


def test_a_webhook_kind_is_refused_at_registration_outside_app_webhook(app: jobtrail.App) -> None:
    """``@app.task("webhook.x")`` and ``@app.periodic(kind="webhook.x")`` would register a
    handler the route never made tasks for: refused by name, nothing registered; the
    ``@app.webhook`` path still registers its kind."""
    with pytest.raises(ValueError, match=r"webhook kind.*@app\.webhook\('pay'\)"):
        app.task("webhook.pay")(lambda ctx, p: None)
    with pytest.raises(ValueError, match="webhook kind"):
        app.periodic("* * * * *", kind="webhook.tick")(lambda ctx, p: None)
    assert not any(k.startswith("webhook.") for k in app.kinds)
    app.webhook("pay")(lambda ctx, event: None)
    assert app.kinds.count("webhook.pay") == 1
