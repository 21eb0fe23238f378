"""``POST /webhooks/{source}`` on both backends: verified before parsing, deduped by
(source, webhook-id) in the transaction that enqueues, refusals store nothing."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

import jobtrail
from jobtrail.web.signatures import parse_secret, sign, sign_github

from ._http_support import SECRET, auth, client, register

KEY = parse_secret(SECRET).key
OTHER = "whsec_" + base64.b64encode(b"another secret key!!").decode()


def signed(
    body: bytes,
    msg_id: str = "msg_1",
    ts: int | None = None,
    key: bytes = KEY,
) -> dict[str, str]:
    stamp = int(time.time()) if ts is None else ts
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(key, msg_id, stamp, body),
        "content-type": "application/json",
    }


def rows(app: jobtrail.App) -> tuple[int, int]:
    """(deliveries, tasks) stored."""
    with app._driver.transaction(write=False) as tx:
        row = tx.one("webhook_delivery_count")
        assert row is not None
        deliveries = row["n"]
    return deliveries, len(app.list())


@pytest.fixture
def web(app: jobtrail.App) -> TestClient:
    return client(register(app), secrets=f"pay={OTHER} {SECRET},nohandler={SECRET}")


BODY = json.dumps({"type": "invoice.paid", "data": {"id": "in_1"}}).encode()


def test_delivery_enqueues_once(web: TestClient, app: jobtrail.App) -> None:
    r = web.post("/webhooks/pay", content=BODY, headers=signed(BODY))
    assert r.status_code == 202, r.text
    first = r.json()
    assert first["duplicate"] is False
    task = app.get(first["task_id"])
    assert task.kind == "webhook.pay" and task.payload == json.loads(BODY)
    again = web.post("/webhooks/pay", content=BODY, headers=signed(BODY))
    assert again.status_code == 200
    assert again.json() == {"task_id": first["task_id"], "duplicate": True}
    assert rows(app) == (1, 1)
    assert len(app.transitions(first["task_id"])) == 1
    # a signature with the older (rotated) secret is accepted as well
    other = parse_secret(OTHER).key
    r = web.post("/webhooks/pay", content=BODY, headers=signed(BODY, "msg_2", key=other))
    assert r.status_code == 202 and r.json()["task_id"] != first["task_id"]
    assert rows(app) == (2, 2)


def _tampered() -> list[tuple[str, bytes, dict[str, Any]]]:
    now = int(time.time())
    good = signed(BODY, "msg_t")
    wrong = parse_secret("whsec_" + base64.b64encode(b"wrong").decode()).key
    return [
        ("changed body", BODY + b" ", good),
        ("old timestamp", BODY, signed(BODY, "msg_t", ts=now - 360)),
        ("future timestamp", BODY, signed(BODY, "msg_t", ts=now + 360)),
        ("wrong secret", BODY, signed(BODY, "msg_t", key=wrong)),
        ("malformed header", BODY, {**good, "webhook-signature": "v1 garbage,,"}),
        ("not base64", BODY, {**good, "webhook-signature": "v1,%%%"}),
        ("no signature", BODY, {k: v for k, v in good.items() if k != "webhook-signature"}),
        ("no id", BODY, {k: v for k, v in good.items() if k != "webhook-id"}),
        ("bad timestamp", BODY, {**good, "webhook-timestamp": "1e9"}),
        ("id swapped", BODY, {**good, "webhook-id": "msg_other"}),
        ("latin-1 header", BODY, {**good, "webhook-signature": "v1,é".encode("latin-1")}),
    ]


@pytest.mark.parametrize("case", range(len(_tampered())))
def test_tampered_deliveries_are_refused_and_store_nothing(
    web: TestClient, app: jobtrail.App, case: int
) -> None:
    name, body, headers = _tampered()[case]
    r = web.post("/webhooks/pay", content=body, headers=headers)
    assert r.status_code == 401, (name, r.status_code, r.text)
    assert rows(app) == (0, 0), name


def test_replayed_old_delivery_refused(web: TestClient, app: jobtrail.App) -> None:
    old = int(time.time()) - 3600
    headers = signed(BODY, "msg_old", ts=old)
    assert web.post("/webhooks/pay", content=BODY, headers=headers).status_code == 401
    assert rows(app) == (0, 0)


def test_unknown_source_and_size(web: TestClient, app: jobtrail.App) -> None:
    assert web.post("/webhooks/nope", content=BODY, headers=signed(BODY)).status_code == 404
    # secrets but no @app.webhook handler: unknown too
    assert web.post("/webhooks/nohandler", content=BODY, headers=signed(BODY)).status_code == 404
    big = b'{"x": "' + b"a" * (1024 * 1024) + b'"}'
    assert web.post("/webhooks/pay", content=big, headers=signed(big)).status_code == 413
    assert rows(app) == (0, 0)


def test_verified_non_json_is_kept_and_400(web: TestClient, app: jobtrail.App) -> None:
    body = b"not json \x00\xff"
    r = web.post("/webhooks/pay", content=body, headers=signed(body, "msg_bad"))
    assert r.status_code == 400 and "kept" in r.json()["error"]
    assert rows(app) == (1, 0)
    with app._driver.transaction(write=False) as tx:
        kept = tx.one("webhook_delivery_get", {"source": "pay", "delivery_id": "msg_bad"})
    assert kept is not None and kept["bad_body"].startswith("not json")
    assert (
        web.post("/webhooks/pay", content=body, headers=signed(body, "msg_bad")).status_code == 400
    )
    assert rows(app) == (1, 0)


@pytest.mark.parametrize(
    "body", [b"[" * 100_000 + b"]" * 100_000, b'{"t": "nul \\u0000"}', b"[" * 200 + b"]" * 200]
)
def test_verified_json_that_is_no_payload_is_kept_and_400(
    web: TestClient, app: jobtrail.App, body: bytes
) -> None:
    r = web.post("/webhooks/pay", content=body, headers=signed(body, "msg_deep"))
    assert r.status_code == 400
    assert rows(app) == (1, 0)


def test_webhooks_need_no_bearer_token_and_count_in_metrics(
    web: TestClient, app: jobtrail.App
) -> None:
    assert web.post("/webhooks/pay", content=BODY, headers=signed(BODY)).status_code == 202
    web.post("/webhooks/pay", content=BODY, headers=signed(BODY, ts=1))
    text = web.get("/metrics", headers=auth("rd")).text
    assert 'jobtrail_webhook_deliveries_total{outcome="queued",source="pay"} 1.0' in text
    assert 'jobtrail_webhook_deliveries_total{outcome="bad_signature",source="pay"} 1.0' in text


def test_github_style_source(app: jobtrail.App) -> None:
    register(app)

    @app.webhook("gh")
    def gh(ctx: Any, event: Any) -> None:
        return None

    # (a secret with spaces cannot be written in JOBTRAIL_WEBHOOK_SECRETS; pass it parsed)
    web = client(app, secrets={"gh": [parse_secret("github:It's a Secret to Everybody")]})
    body = b'{"zen": "Hello, World!"}'
    headers = {
        "x-hub-signature-256": sign_github(b"It's a Secret to Everybody", body),
        "x-github-delivery": "72d3162e",
        "x-github-event": "ping",
    }
    r = web.post("/webhooks/gh", content=body, headers=headers)
    assert r.status_code == 202
    assert web.post("/webhooks/gh", content=body, headers=headers).json()["duplicate"] is True
    bad = {**headers, "x-hub-signature-256": "sha256=" + "0" * 64}
    assert (
        web.post(
            "/webhooks/gh", content=body, headers={**bad, "x-github-delivery": "x"}
        ).status_code
        == 401
    )
    assert rows(app) == (1, 1)


def test_receipt_mapping_confirms_the_awaiting_task(app: jobtrail.App) -> None:
    @app.task("submit")
    def submit(ctx: Any, payload: Any) -> Any:
        return ctx.await_receipt("rcpt-7", timeout=600)

    @app.webhook("prov", receipt=lambda e: (e["receipt"], e["ok"], e.get("category"), None))
    def prov(ctx: Any, event: Any) -> None:
        return None

    task = app.enqueue("submit")
    app.run_worker(burst=True, concurrency=1, poll_interval=0.05)
    assert app.get(task.id).state == "awaiting_receipt"
    web = client(app, secrets=f"prov={SECRET}")
    body = json.dumps({"type": "receipt", "receipt": "rcpt-7", "ok": True}).encode()
    assert web.post("/webhooks/prov", content=body, headers=signed(body)).status_code == 202
    app.run_worker(burst=True, concurrency=1, poll_interval=0.05)
    done = app.get(task.id)
    assert done.state == "succeeded"
    assert app.transitions(task.id)[-1].actor == "webhook:prov"


def test_racing_repeat_deliveries_make_one_task(app: jobtrail.App) -> None:
    from concurrent.futures import ThreadPoolExecutor

    register(app)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: app.receive_webhook("pay", "msg_race", BODY), range(8)))
    assert sum(not d.duplicate for d in got) == 1
    assert {d.task_id for d in got} == {got[0].task_id}
    assert rows(app) == (1, 1)
