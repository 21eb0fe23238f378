"""Webhook schemes through a real ``jobtrail serve`` on both backends: deliveries signed by the
providers' own libraries (``standardwebhooks``, ``svix``, ``stripe`` from the package index)
are accepted under every header spelling those senders use, a retried delivery is one task,
and a delivery is deduplicated on what its sender signed — never on an unsigned header, never
on a cut key."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
import stripe
import svix
from serve_process import Serve

STANDARD = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
GITHUB = "gh-s3cret"
STRIPE = "whsec_test_5fe3c1a0b4d2e6f8a9b7c5d3e1f0a2b4"
SECRETS = f"pay={STANDARD},gh=github:{GITHUB},stripe=stripe:{STRIPE}"
APP_MODULE = """
import jobtrail

app = jobtrail.App()

for source in ("pay", "gh", "stripe"):
    app.webhook(source)(lambda ctx, event: None)
"""
ADM = {"Authorization": "Bearer adm"}


@pytest.fixture
def served(store: Any, tmp_path: Path) -> Iterator[Serve]:
    server = Serve(
        tmp_path,
        store.url,
        tokens="adm:admin",
        app_module=APP_MODULE,
        env={"JOBTRAIL_WEBHOOK_SECRETS": SECRETS},
    )
    try:
        yield server
    finally:
        server.stop()


def post(s: Serve, source: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{s.base}/webhooks/{source}", content=body, headers=headers, timeout=10)


def tasks(s: Serve) -> list[dict[str, Any]]:
    r = httpx.get(s.base + "/api/tasks", headers=ADM, timeout=10)
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["tasks"]
    return found


def standard_headers(signer: Any, msg_id: str, body: bytes, prefix: str) -> dict[str, str]:
    now = datetime.now(UTC)
    return {
        f"{prefix}-id": msg_id,
        f"{prefix}-timestamp": str(int(now.timestamp())),
        f"{prefix}-signature": signer.sign(msg_id, now, body.decode()),
    }


def test_svix_standard_webhooks_and_stripe_senders_are_accepted(served: Serve) -> None:
    body = json.dumps({"type": "invoice.paid", "n": 1}).encode()
    svix_signer = svix.Webhook(STANDARD)
    # Svix's own header names, as Svix-powered providers send them (was 401 "missing
    # webhook-id…"), then the same message id under webhook-* names: one delivery
    first = post(served, "pay", body, standard_headers(svix_signer, "msg_svix", body, "svix"))
    assert first.status_code == 202, first.text
    again = post(served, "pay", body, standard_headers(svix_signer, "msg_svix", body, "webhook"))
    assert again.status_code == 200 and again.json() == {**first.json(), "duplicate": True}
    std = standardwebhooks.Webhook(STANDARD)
    other = post(served, "pay", body, standard_headers(std, "msg_std", body, "webhook"))
    assert other.status_code == 202 and other.json()["task_id"] != first.json()["task_id"]

    # Stripe: a retried event (a new timestamp and signature, the same event id) is one task
    event = json.dumps({"id": "evt_1NJ", "object": "event", "type": "charge.succeeded"})
    header = stripe.WebhookSignature.generate_signature_header(event, STRIPE)
    paid = post(served, "stripe", event.encode(), {"Stripe-Signature": header})
    assert paid.status_code == 202, paid.text
    later = stripe.WebhookSignature.generate_signature_header(event, STRIPE, int(time.time()) + 2)
    retried = post(served, "stripe", event.encode(), {"Stripe-Signature": later})
    assert retried.status_code == 200 and retried.json()["task_id"] == paid.json()["task_id"]
    stale = stripe.WebhookSignature.generate_signature_header(event, STRIPE, int(time.time()) - 400)
    refused = post(served, "stripe", event.encode(), {"Stripe-Signature": stale})
    assert refused.status_code == 401 and "tolerance" in refused.json()["error"]
    wrong = stripe.WebhookSignature.generate_signature_header(event, "whsec_other")
    assert post(served, "stripe", event.encode(), {"Stripe-Signature": wrong}).status_code == 401
    kinds = sorted(t["kind"] for t in tasks(served))
    assert kinds == ["webhook.pay", "webhook.pay", "webhook.stripe"]


def test_a_replayed_github_delivery_is_no_new_task(served: Serve) -> None:
    import hashlib
    import hmac

    body = json.dumps({"action": "opened", "number": 7}).encode()
    signature = "sha256=" + hmac.new(GITHUB.encode(), body, hashlib.sha256).hexdigest()
    answers = [
        post(
            served,
            "gh",
            body,
            {
                "X-Hub-Signature-256": signature,
                "X-GitHub-Delivery": f"replayed-{i}",  # unsigned: a replayer picks any
                "X-GitHub-Event": "push" if i else "pull_request",
            },
        )
        for i in range(5)
    ]
    assert [a.status_code for a in answers] == [202, 200, 200, 200, 200], answers[-1].text
    assert {a.json()["task_id"] for a in answers} == {answers[0].json()["task_id"]}
    assert len(tasks(served)) == 1


def test_long_delivery_ids_are_never_cut_into_each_other(served: Serve) -> None:
    std = standardwebhooks.Webhook(STANDARD)
    common = "m" * 244
    ids = [common + "a" * 11, common + "b" * 11]  # 255 characters each
    body = b"{}"
    first = [post(served, "pay", body, standard_headers(std, i, body, "webhook")) for i in ids]
    # before: the key webhook:pay:<id> was cut at 255 characters, so the second was 409
    assert [r.status_code for r in first] == [202, 202], first[1].text
    again = [post(served, "pay", body, standard_headers(std, i, body, "webhook")) for i in ids]
    assert [r.status_code for r in again] == [200, 200]
    assert [r.json()["task_id"] for r in again] == [r.json()["task_id"] for r in first]
    assert len({r.json()["task_id"] for r in first}) == 2 and len(tasks(served)) == 2
