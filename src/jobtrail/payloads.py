"""Payload validation: refuse in jobtrail what either backend would refuse or change.

A payload is stored faithfully and read back equal on both backends, or refused with a clear
error before anything is written. PostgreSQL ``jsonb`` refuses ``\\u0000``; lone surrogates are
not UTF-8; tuples, non-string keys and NaN would not read back equal — so all are refused here.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from decimal import Decimal
from typing import Any

MAX_DEPTH = 100


def _check(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"payload is nested deeper than {MAX_DEPTH} levels (at {path})")
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"payload holds a non-finite number at {path}: {value!r}")
        return
    if isinstance(value, str):
        _check_text(value, path)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"payload keys must be strings; {path} has a key of type {type(key).__name__}"
                )
            _check_text(key, f"{path} key {key[:20]!r}")
            _check(item, f"{path}.{key}", depth + 1)
        return
    raise TypeError(
        f"payload is not JSON-serialisable: {path} is a {type(value).__name__} (use dict, list, "
        "str, int, float, bool or None)"
    )


def _check_text(text: str, path: str) -> None:
    if "\x00" in text:
        raise ValueError(f"payload text at {path} contains a NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"payload text at {path} is not valid Unicode (a lone surrogate)"
        ) from None


def _exponent_float(value: Any) -> bool:
    """A float that Python writes with a positive exponent (``1e+16``). PostgreSQL ``jsonb``
    stores numbers as ``numeric`` and writes that back as ``10000000000000000`` — an int when
    read, and for ``1e+308`` not even the same value — so such floats are written out in full
    with a ``.0``, which ``jsonb`` keeps and every reader parses back as the same float."""
    return isinstance(value, float) and "e+" in repr(value)


def _dumps(payload: Any) -> str:
    found: list[float] = []

    def swap(value: Any) -> Any:
        if _exponent_float(value):
            found.append(value)
            return f"{marker}{len(found) - 1}"
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    marker = f"jtfloat-{secrets.token_hex(16)}-"
    swapped = swap(payload)
    text = json.dumps(swapped, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for i, value in enumerate(found):
        text = text.replace(f'"{marker}{i}"', format(Decimal(repr(value)), "f") + ".0", 1)
    return text


def _has_exponent_float(value: Any) -> bool:
    if isinstance(value, list):
        return any(_has_exponent_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_exponent_float(v) for v in value.values())
    return _exponent_float(value)


def encode(payload: Any, max_bytes: int) -> tuple[str, str]:
    """``(json text, hash)`` for a payload, or ``TypeError``/``ValueError`` naming the problem."""
    _check(payload, "payload", 0)
    if _has_exponent_float(payload):
        text = _dumps(payload)
    else:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ValueError(f"payload is {size} bytes once encoded; the limit is {max_bytes} bytes")
    canonical = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return text, hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def intent_key(*parts: Any) -> str:
    """A stable, high-entropy idempotency key from business identifiers and inputs.

    ``intent_key("note", 42, "publish", payload)`` is the same for the same parts and never
    carries the parts themselves (no prompts, e-mails or tokens end up in keys or logs).
    """
    if not parts:
        raise ValueError("intent_key() needs at least one part")
    _check(list(parts), "intent_key parts", 0)
    canonical = json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return "ik_" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
