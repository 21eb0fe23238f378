"""Webhook signatures, verified over the raw body before anything parses it.

Standard Webhooks: headers ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``
— or the same three under Svix's names ``svix-id``, ``svix-timestamp``, ``svix-signature``,
what Svix-powered providers send — (space-separated ``v1,<base64>`` entries, several allowed so
secrets can rotate), HMAC-SHA256 over ``{id}.{timestamp}.{body}`` keyed with the
base64-decoded part of ``whsec_<base64>``, and a 5-minute tolerance both ways. The delivery is
deduplicated on the signed id. The tolerance uses this server's clock: signature freshness is
a property of the request, not a task decision, so the database clock is not consulted.

GitHub style (a secret written ``github:<secret>``): ``X-Hub-Signature-256: sha256=<hex>`` over
the body. GitHub signs neither a timestamp nor its ``X-GitHub-Delivery`` id, so a delivery is
deduplicated on what it did sign: the SHA-256 of the body (``sha256:<hex>``), per source. A
replay of a captured delivery — under any delivery id and any ``X-GitHub-Event`` — is the
same delivery: it answers with the first task and makes none.

Stripe (a secret written ``stripe:whsec_...``, the endpoint's signing secret as Stripe shows
it): ``Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]``, HMAC-SHA256 keyed with the
secret's text over ``{t}.{body}``, a 5-minute tolerance; a retried event is deduplicated on the
event's own ``id`` from the signed body (``sha256:<hex>`` of the body when it has none).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

TOLERANCE = 300.0
#: The longest delivery id a sender may sign (the Standard Webhooks and Stripe ids are short).
MAX_ID = 255
STYLES = ("standard", "github", "stripe")
#: ``(webhook-*, svix-*)``: the same Standard Webhooks header under its two spellings.
_STANDARD_HEADERS = (
    ("webhook-id", "svix-id"),
    ("webhook-timestamp", "svix-timestamp"),
    ("webhook-signature", "svix-signature"),
)


class BadSignature(Exception):
    """Missing, malformed, stale or wrong signature (the message never holds secrets)."""


@dataclass(frozen=True)
class Secret:
    style: str  # one of STYLES
    key: bytes


def parse_secret(text: str) -> Secret:
    for style in ("github", "stripe"):
        if text.startswith(style + ":"):
            if len(text) == len(style) + 1:
                raise ValueError(f"an empty {style}: webhook secret")
            return Secret(style, text[len(style) + 1 :].encode("utf-8"))
    raw = text[len("whsec_") :] if text.startswith("whsec_") else text
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "a webhook secret must be whsec_<base64>, github:<secret> or stripe:whsec_..."
        ) from None
    if not key:
        raise ValueError("an empty webhook secret")
    return Secret("standard", key)


def parse_secrets(text: str | None) -> dict[str, list[Secret]]:
    """``source=whsec_a whsec_b,other=whsec_c`` → secrets per source."""
    out: dict[str, list[Secret]] = {}
    for i, entry in enumerate((text or "").split(",")):
        entry = entry.strip()
        if not entry:
            continue
        source, sep, rest = entry.partition("=")
        source = source.strip()
        if not sep or not source or not rest.split():
            raise ValueError(
                f"JOBTRAIL_WEBHOOK_SECRETS entry {i + 1} must look like source=whsec_... "
                "(several secrets separated by spaces)"
            )
        try:
            out.setdefault(source, []).extend(parse_secret(s) for s in rest.split())
        except ValueError as exc:
            raise ValueError(f"JOBTRAIL_WEBHOOK_SECRETS entry {i + 1}: {exc}") from None
    return out


def sign(key: bytes, msg_id: str, timestamp: int | str, body: bytes) -> str:
    """The Standard Webhooks ``v1,<base64>`` signature."""
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode("ascii")


def sign_github(key: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def sign_stripe(key: bytes, timestamp: int | str, body: bytes) -> str:
    """The hex ``v1`` signature of a ``Stripe-Signature`` header."""
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def body_digest(body: bytes) -> str:
    """The delivery id of a sender that signs no id of its own: ``sha256:<hex>`` of the body."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class Verified:
    delivery_id: str
    event_type: str | None


def verify(
    secrets: list[Secret],
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
    tolerance: float = TOLERANCE,
) -> Verified:
    """Check a delivery against the source's secrets; raise ``BadSignature`` otherwise."""
    keys = {style: [s.key for s in secrets if s.style == style] for style in STYLES}
    clock = time.time() if now is None else now
    if keys["github"] and headers.get("x-hub-signature-256") is not None:
        return _verify_github(keys["github"], headers, body)
    if keys["stripe"] and headers.get("stripe-signature") is not None:
        return _verify_stripe(keys["stripe"], headers, body, clock, tolerance)
    if not keys["standard"]:
        wanted = [
            name
            for style, name in (("github", "X-Hub-Signature-256"), ("stripe", "Stripe-Signature"))
            if keys[style]
        ]
        raise BadSignature(f"missing {' or '.join(wanted)} header")
    msg_id, stamp, given = (headers.get(a) or headers.get(b) for a, b in _STANDARD_HEADERS)
    if not msg_id or not stamp or not given:
        raise BadSignature(
            "missing webhook-id, webhook-timestamp or webhook-signature "
            "(or svix-id, svix-timestamp, svix-signature)"
        )
    if len(msg_id) > MAX_ID:
        raise BadSignature("webhook-id is too long")
    _fresh(stamp, clock, tolerance, "webhook-timestamp")
    offered = [p.partition(",") for p in given.split(" ") if p]
    candidates = [sig.encode("ascii", "replace") for ver, _, sig in offered if ver == "v1"]
    if not candidates:
        raise BadSignature("no v1 signature in webhook-signature")
    ok = False
    for key in keys["standard"]:
        expected = sign(key, msg_id, stamp, body).partition(",")[2].encode("ascii")
        for candidate in candidates:
            ok |= hmac.compare_digest(expected, candidate)
    if not ok:
        raise BadSignature("no signature matches")
    return Verified(msg_id, None)


def _fresh(stamp: str, clock: float, tolerance: float, name: str) -> None:
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        raise BadSignature(f"{name} is not a number of seconds")
    if abs(clock - int(stamp)) > tolerance:
        raise BadSignature(f"{name} is outside the 5-minute tolerance")


def _verify_github(keys: list[bytes], headers: Mapping[str, str], body: bytes) -> Verified:
    given = headers.get("x-hub-signature-256", "").encode("ascii", "replace")
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(sign_github(key, body).encode("ascii"), given)
    if not ok:
        raise BadSignature("no signature matches")
    # X-GitHub-Delivery and X-GitHub-Event are not signed: the body is the delivery
    event = headers.get("x-github-event")
    return Verified(body_digest(body), event[:255] if event else None)


def _verify_stripe(
    keys: list[bytes], headers: Mapping[str, str], body: bytes, clock: float, tolerance: float
) -> Verified:
    stamp: str | None = None
    candidates: list[bytes] = []
    for item in headers.get("stripe-signature", "").split(","):
        name, _, value = item.strip().partition("=")
        if name == "t" and stamp is None:
            stamp = value
        elif name == "v1" and value:
            candidates.append(value.encode("ascii", "replace"))
    if stamp is None:
        raise BadSignature("no t= timestamp in Stripe-Signature")
    if not candidates:
        raise BadSignature("no v1 signature in Stripe-Signature")
    _fresh(stamp, clock, tolerance, "Stripe-Signature t=")
    ok = False
    for key in keys:
        expected = sign_stripe(key, stamp, body).encode("ascii")
        for candidate in candidates:
            ok |= hmac.compare_digest(expected, candidate)
    if not ok:
        raise BadSignature("no signature matches")
    return Verified(_event_id(body), None)


def _event_id(body: bytes) -> str:
    """A Stripe event's own ``id`` (what a retry repeats), read from the body once its
    signature holds; the body's digest when it has none (or is not JSON)."""
    try:
        event = json.loads(body)
    except (ValueError, RecursionError):
        return body_digest(body)
    found = event.get("id") if isinstance(event, dict) else None
    if isinstance(found, str) and found and len(found) <= MAX_ID and "\x00" not in found:
        return found
    return body_digest(body)
