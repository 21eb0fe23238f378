"""Webhook signatures, verified over the raw body before anything parses it (§12).

Standard Webhooks: headers ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``
(space-separated ``v1,<base64>`` entries, several allowed so secrets can rotate), HMAC-SHA256
over ``{id}.{timestamp}.{body}`` keyed with the base64-decoded part of ``whsec_<base64>``, and a
5-minute tolerance both ways. The tolerance uses this server's clock: signature freshness is a
property of the request, not a task decision, so the database clock is not consulted.

GitHub style (a secret written ``github:<secret>``): ``X-Hub-Signature-256: sha256=<hex>`` over
the body, delivery id ``X-GitHub-Delivery``, event ``X-GitHub-Event``. GitHub sends no
timestamp, so only the delivery dedupe guards against replays.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass

TOLERANCE = 300.0


class BadSignature(Exception):
    """Missing, malformed, stale or wrong signature (the message never holds secrets)."""


@dataclass(frozen=True)
class Secret:
    style: str  # "standard" or "github"
    key: bytes


def parse_secret(text: str) -> Secret:
    if text.startswith("github:"):
        if len(text) == len("github:"):
            raise ValueError("an empty github: webhook secret")
        return Secret("github", text[len("github:") :].encode("utf-8"))
    raw = text[len("whsec_") :] if text.startswith("whsec_") else text
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret must be whsec_<base64> or github:<secret>") from None
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
    standard = [s.key for s in secrets if s.style == "standard"]
    github = [s.key for s in secrets if s.style == "github"]
    if github and headers.get("x-hub-signature-256") is not None:
        return _verify_github(github, headers, body)
    if not standard:
        raise BadSignature("missing X-Hub-Signature-256 header")
    msg_id = headers.get("webhook-id")
    stamp = headers.get("webhook-timestamp")
    given = headers.get("webhook-signature")
    if not msg_id or not stamp or not given:
        raise BadSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    if len(msg_id) > 255:
        raise BadSignature("webhook-id is too long")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        raise BadSignature("webhook-timestamp is not a number of seconds")
    clock = time.time() if now is None else now
    if abs(clock - int(stamp)) > tolerance:
        raise BadSignature("webhook-timestamp is outside the 5-minute tolerance")
    offered = [p.partition(",") for p in given.split(" ") if p]
    candidates = [sig.encode("ascii", "replace") for ver, _, sig in offered if ver == "v1"]
    if not candidates:
        raise BadSignature("no v1 signature in webhook-signature")
    ok = False
    for key in standard:
        expected = sign(key, msg_id, stamp, body).partition(",")[2].encode("ascii")
        for candidate in candidates:
            ok |= hmac.compare_digest(expected, candidate)
    if not ok:
        raise BadSignature("no signature matches")
    return Verified(msg_id, None)


def _verify_github(keys: list[bytes], headers: Mapping[str, str], body: bytes) -> Verified:
    given = headers.get("x-hub-signature-256", "").encode("ascii", "replace")
    delivery = headers.get("x-github-delivery")
    if not delivery or len(delivery) > 255:
        raise BadSignature("missing X-GitHub-Delivery header")
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(sign_github(key, body).encode("ascii"), given)
    if not ok:
        raise BadSignature("no signature matches")
    event = headers.get("x-github-event")
    return Verified(delivery, event[:255] if event else None)
