"""Payload checks refuse what either backend would refuse or change, before any write."""

from __future__ import annotations

import pytest

from jobtrail import intent_key
from jobtrail.core.payloads import encode


@pytest.mark.parametrize(
    ("payload", "error", "words"),
    [
        ({"a": object()}, TypeError, "not JSON-serialisable"),
        ({"a": (1, 2)}, TypeError, "tuple"),
        ({1: "x"}, TypeError, "keys must be strings"),
        ({"a": float("nan")}, ValueError, "non-finite"),
        ({"a": "x\x00y"}, ValueError, "NUL"),
        ({"a\x00": 1}, ValueError, "NUL"),
        ({"a": "\ud800"}, ValueError, "surrogate"),
        ("x" * (1024 * 1024), ValueError, "limit"),
    ],
)
def test_refused_payloads_name_the_problem(payload: object, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        encode(payload, 1024 * 1024)


def test_deep_nesting_is_refused_clearly() -> None:
    deep: object = 1
    for _ in range(150):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper"):
        encode(deep, 1024 * 1024)


def test_hash_ignores_key_order_but_not_values() -> None:
    _, h1 = encode({"a": 1, "b": [1, 2]}, 1000)
    _, h2 = encode({"b": [1, 2], "a": 1}, 1000)
    _, h3 = encode({"a": 1, "b": [2, 1]}, 1000)
    assert h1 == h2 != h3


def test_intent_key_is_stable_and_hides_its_parts() -> None:
    key = intent_key("note", 42, "publish", {"email": "a@example.com"})
    assert key == intent_key("note", 42, "publish", {"email": "a@example.com"})
    assert key != intent_key("note", 43, "publish", {"email": "a@example.com"})
    assert "example" not in key and "42" not in key[:3]
    assert key.startswith("ik_") and len(key) == 67
    with pytest.raises(ValueError):
        intent_key()
