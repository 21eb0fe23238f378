"""Each webhook scheme against its provider's own library: the provider's
verifier accepts what jobtrail's test signer signs, and jobtrail's verifier accepts what the
provider's signer signs — so the tests that sign with our helpers test the real scheme."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
import stripe
import svix

from jobtrail.web.signatures import (
    BadSignature,
    body_digest,
    parse_secret,
    sign,
    sign_stripe,
    verify,
)

STANDARD = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
STRIPE = "whsec_test_5fe3c1a0b4d2e6f8a9b7c5d3e1f0a2b4"
BODY = json.dumps({"id": "evt_1", "type": "charge.succeeded"}).encode()


def test_standard_webhooks_both_ways_under_both_header_spellings() -> None:
    key = parse_secret(STANDARD)
    stamp = int(time.time())
    ours = sign(key.key, "msg_1", stamp, BODY)
    for prefix in ("webhook", "svix"):
        headers = {
            f"{prefix}-id": "msg_1",
            f"{prefix}-timestamp": str(stamp),
            f"{prefix}-signature": ours,
        }
        svix.Webhook(STANDARD).verify(BODY, headers)  # raises if it does not hold
        if prefix == "webhook":
            standardwebhooks.Webhook(STANDARD).verify(BODY, headers)
        theirs = svix.Webhook(STANDARD).sign(
            "msg_1", datetime.fromtimestamp(stamp, UTC), BODY.decode()
        )
        assert (
            verify([key], {**headers, f"{prefix}-signature": theirs}, BODY).delivery_id == "msg_1"
        )
    other = standardwebhooks.Webhook(STANDARD).sign("msg_2", datetime.now(UTC), BODY)
    headers = {"webhook-id": "msg_2", "webhook-timestamp": str(int(time.time()))}
    assert verify([key], {**headers, "webhook-signature": other}, BODY).delivery_id == "msg_2"


def test_stripe_both_ways_and_its_tolerance() -> None:
    key = parse_secret("stripe:" + STRIPE)
    stamp = int(time.time())
    ours = f"t={stamp},v1={sign_stripe(key.key, stamp, BODY)}"
    stripe.WebhookSignature.verify_header(BODY, ours, STRIPE, tolerance=300)
    theirs = stripe.WebhookSignature.generate_signature_header(BODY.decode(), STRIPE)
    assert verify([key], {"stripe-signature": theirs}, BODY).delivery_id == "evt_1"
    # rotated secrets: Stripe sends one v1 per secret
    both = f"{theirs},v1={sign_stripe(b'whsec_old', stamp, BODY)}"
    assert verify([key], {"stripe-signature": both}, BODY).delivery_id == "evt_1"
    old = stripe.WebhookSignature.generate_signature_header(BODY.decode(), STRIPE, stamp - 301)
    with pytest.raises(BadSignature, match="tolerance"):
        verify([key], {"stripe-signature": old}, BODY)
    with pytest.raises(BadSignature, match="no signature matches"):
        verify([key], {"stripe-signature": theirs}, BODY + b" ")
    # an event without an id of its own is keyed on what was signed: the body
    plain = b'{"type": "x"}'
    header = stripe.WebhookSignature.generate_signature_header(plain.decode(), STRIPE)
    assert verify([key], {"stripe-signature": header}, plain).delivery_id == body_digest(plain)
