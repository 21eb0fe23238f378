"""Webhook signatures and token parsing, against the published test vectors."""

from __future__ import annotations

import pytest

from jobtrail.web.auth import OPEN, Principal, authenticate, parse_tokens
from jobtrail.web.signatures import (
    BadSignature,
    body_digest,
    parse_secret,
    parse_secrets,
    sign,
    sign_github,
    verify,
)

# Standard Webhooks reference test vector (standard-webhooks/standard-webhooks libraries' tests)
SW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SW_TS = 1614265330
SW_BODY = b'{"test": 2432232314}'
SW_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def sw_headers(sig: str = SW_SIG, ts: int | str = SW_TS, msg_id: str = SW_ID) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig}


def test_standard_webhooks_vector() -> None:
    key = parse_secret(SW_SECRET).key
    assert sign(key, SW_ID, SW_TS, SW_BODY) == SW_SIG
    got = verify([parse_secret(SW_SECRET)], sw_headers(), SW_BODY, now=SW_TS + 10)
    assert got.delivery_id == SW_ID


def test_github_vector() -> None:
    # docs.github.com "Validating webhook deliveries"
    assert (
        sign_github(b"It's a Secret to Everybody", b"Hello, World!")
        == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )
    secret = parse_secret("github:It's a Secret to Everybody")
    headers = {
        "x-hub-signature-256": sign_github(secret.key, b"Hello, World!"),
        "x-github-delivery": "d-1",
        "x-github-event": "push",
    }
    got = verify([secret], headers, b"Hello, World!")
    # the delivery is what GitHub signed, the body: X-GitHub-Delivery is not signed
    assert (got.delivery_id, got.event_type) == (body_digest(b"Hello, World!"), "push")
    replayed = verify([secret], {**headers, "x-github-delivery": "d-2"}, b"Hello, World!")
    assert replayed.delivery_id == got.delivery_id
    with pytest.raises(BadSignature):
        verify([secret], headers, b"Hello, World?")


def test_rotation_accepts_any_configured_secret_and_any_offered_signature() -> None:
    other = "whsec_" + "QUJDREVGR0hJSktMTU5PUA=="
    secrets = [parse_secret(other), parse_secret(SW_SECRET)]
    offered = f"v1,bm9wZQ== v2,xyz {SW_SIG}"
    assert verify(secrets, sw_headers(offered), SW_BODY, now=SW_TS).delivery_id == SW_ID


@pytest.mark.parametrize(
    "headers,body,now",
    [
        (sw_headers(), b'{"test": 2432232315}', SW_TS),  # changed body
        (sw_headers(), SW_BODY, SW_TS + 301),  # too old
        (sw_headers(), SW_BODY, SW_TS - 301),  # from the future
        (sw_headers(msg_id="msg_other"), SW_BODY, SW_TS),  # id not the signed one
        (sw_headers(ts=SW_TS + 1), SW_BODY, SW_TS),  # timestamp not the signed one
        (sw_headers("g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), SW_BODY, SW_TS),  # no v1,
        (sw_headers("v1,"), SW_BODY, SW_TS),
        (sw_headers("v1,ü∂"), SW_BODY, SW_TS),
        (sw_headers(ts="soon"), SW_BODY, SW_TS),
        (sw_headers(ts="-1614265330"), SW_BODY, SW_TS),
        ({"webhook-id": SW_ID, "webhook-timestamp": str(SW_TS)}, SW_BODY, SW_TS),
        ({}, SW_BODY, SW_TS),
    ],
)
def test_refused(headers: dict[str, str], body: bytes, now: int) -> None:
    with pytest.raises(BadSignature):
        verify([parse_secret(SW_SECRET)], headers, body, now=now)


def test_wrong_secret_refused() -> None:
    wrong = parse_secret("whsec_" + "QUJDREVGR0hJSktMTU5PUA==")
    with pytest.raises(BadSignature):
        verify([wrong], sw_headers(), SW_BODY, now=SW_TS)


def test_secret_parsing() -> None:
    parsed = parse_secrets(f"pay={SW_SECRET} whsec_QUJD,gh=github:s3cret")
    assert [len(parsed["pay"]), len(parsed["gh"])] == [2, 1]
    for bad in ("pay", "=whsec_QUJD", "pay=whsec_!!!", "pay=github:"):
        with pytest.raises(ValueError) as info:
            parse_secrets(bad)
        assert "QUJD" not in str(info.value)


def test_tokens() -> None:
    tokens = parse_tokens("tok1:admin,tok2:read,tok3:admin:tenantA")
    assert authenticate(tokens, "Bearer tok1") == Principal("admin")
    assert authenticate(tokens, "bearer tok2") == Principal("read")
    assert authenticate(tokens, "Bearer tok3") == Principal("admin", "tenantA")
    for header in (None, "", "Bearer", "Bearer tok", "Basic tok1", "tok1"):
        assert authenticate(tokens, header) is None
    assert authenticate([], None) is OPEN
    for bad in ("tok", "tok:owner", ":admin", "tok:admin:", "a:b:c:d"):
        with pytest.raises(ValueError) as info:
            parse_tokens(bad)
        assert "tok" not in str(info.value).split("like")[0]
