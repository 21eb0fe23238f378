"""Payloads with floats like ``1e300`` are encoded in one pass (finding: ``_dumps`` called
``str.replace`` on the whole text once per such float, so 16,000 of them took 68 s of CPU), to
the very text and hash the earlier encoder gave. Speed itself is measured in
``bench/encode.py``, never asserted here."""

from __future__ import annotations

import hashlib
import json
import secrets
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobtrail.core import payloads
from jobtrail.core.payloads import encode
from jobtrail.store.base import dumps

LIMIT = 1 << 30


def earlier_dumps(payload: Any) -> str:
    """The encoder before the fix, kept as the reference of the text (quadratic, so only for
    small payloads)."""
    found: list[float] = []

    def swap(value: Any) -> Any:
        if isinstance(value, float) and "e+" in repr(value):
            found.append(value)
            return f"{marker}{len(found) - 1}"
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    marker = f"jtfloat-{secrets.token_hex(16)}-"
    text = dumps(swap(payload))
    for i, value in enumerate(found):
        text = text.replace(f'"{marker}{i}"', format(Decimal(repr(value)), "f") + ".0", 1)
    return text


def earlier_hash(payload: Any) -> str:
    canonical = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e16, 1e300, 1.7976931348623157e308, 2.5e22, -1e17, 1e15, 123456789.0e10, 5e-324]
)
texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))
scalars = st.none() | st.booleans() | st.integers() | floats | texts
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(texts, inner, max_size=6),
    max_leaves=40,
)


@given(values)
@example([1e300] * 50)
@example({"b": 1e300, "a": [1e16, {"z": -2.5e22, "y": "1e300"}], "c": 1.5})
@example(["jtfloat-0", 1e300, "jtfloat-", 1e17])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_text_and_hash_are_the_earlier_ones(payload: Any) -> None:
    text, digest = encode(payload, LIMIT)
    assert text == earlier_dumps(payload)
    assert digest == earlier_hash(payload)
    # and what it stores reads back as the same values
    assert json.loads(text) == payload


@pytest.mark.parametrize("n", [1, 2, 1_000, 16_000])
def test_many_exponent_floats_read_back_equal(n: int) -> None:
    payload = {"xs": [1e300] * n, "ys": [float(f"1.{i}e+{200 + i % 100}") for i in range(n)]}
    text, digest = encode(payload, LIMIT)
    assert json.loads(text) == payload
    assert digest == earlier_hash(payload)
    assert "e+" not in text and "jtfloat" not in text
    if n <= 1_000:
        assert text == earlier_dumps(payload)


class CountingText(str):
    """The dumped text, counting the whole-text operations done on it and on what they give."""

    calls = 0

    def _count(self) -> None:
        CountingText.calls += 1

    def replace(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        self._count()
        return CountingText(str.replace(self, *args, **kwargs))

    def split(self, *args: Any, **kwargs: Any) -> list[str]:  # type: ignore[override]
        self._count()
        return str.split(self, *args, **kwargs)

    def find(self, *args: Any, **kwargs: Any) -> int:  # type: ignore[override]
        self._count()
        return str.find(self, *args, **kwargs)

    def index(self, *args: Any, **kwargs: Any) -> int:  # type: ignore[override]
        self._count()
        return str.index(self, *args, **kwargs)


def test_the_text_is_passed_over_once_however_many_floats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The structural form of "linear": the number of passes over the whole text does not grow
    with the number of floats to write out (it was one ``str.replace`` per float)."""
    monkeypatch.setattr(payloads, "dumps", lambda value: CountingText(dumps(value)))
    passes = []
    for n in (10, 1_000, 16_000):
        CountingText.calls = 0
        text, _ = encode([1e300] * n, LIMIT)
        assert text.count(".") == n
        passes.append(CountingText.calls)
    assert passes[0] == passes[1] == passes[2] <= 1, passes


@given(st.floats(allow_nan=False, allow_infinity=False))
@example(1e16)
@example(-1e16)
@example(9999999999999998.0)
@example(-9999999999999998.0)
@example(10000000000000002.0)
@example(1.7976931348623157e308)
@example(5e-324)
def test_exponent_floats_are_those_repr_writes_with_a_positive_exponent(x: float) -> None:
    assert payloads._exponent_float(x) == ("e+" in repr(x))
    flags = payloads._check(x, "payload", 0)
    assert bool(flags & payloads._EXPONENT) == ("e+" in repr(x))
