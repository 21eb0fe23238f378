"""SPEC §16.7 on both backends: only the webhook route makes webhook tasks.

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

from ._effects_support import burst
from ._http_support import auth, client, register

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
