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

from ..store.base import dumps

MAX_DEPTH = 100


#: What ``_check`` found besides errors: a float written with a positive exponent (see
#: ``_exponent_float``), and an object whose keys are not in sorted order (then the canonical
#: text for the hash differs from the stored text).
_EXPONENT = 1
_UNSORTED = 2


def _check(value: Any, path: str, depth: int) -> int:
    """Raise on what either backend would refuse or change; else the ``_EXPONENT`` /
    ``_UNSORTED`` flags of ``value`` (one walk for the checks and for ``encode``)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"payload is nested deeper than {MAX_DEPTH} levels (at {path})")
    if value is None or isinstance(value, bool | int):
        return 0
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"payload holds a non-finite number at {path}: {value!r}")
        return _EXPONENT if -1e16 >= value or value >= 1e16 else 0  # _exponent_float
    if isinstance(value, str):
        _check_text(value, path)
        return 0
    flags = 0
    if isinstance(value, list):
        for i, item in enumerate(value):
            flags |= _check(item, f"{path}[{i}]", depth + 1)
        return flags
    if isinstance(value, dict):
        previous: str | None = None
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"payload keys must be strings; {path} has a key of type {type(key).__name__}"
                )
            _check_text(key, f"{path} key {key[:20]!r}")
            flags |= _check(item, f"{path}.{key}", depth + 1)
            if previous is not None and key < previous:
                flags |= _UNSORTED
            previous = key
        return flags
    raise TypeError(
        f"payload is not JSON-serialisable: {path} is a {type(value).__name__} (use dict, list, "
        "str, int, float, bool or None)"
    )


def _check_text(text: str, path: str) -> None:
    if "\x00" in text:
        raise ValueError(f"payload text at {path} contains a NUL character (\\u0000)")
    if text.isascii():  # no lone surrogate possible
        return
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
    with a ``.0``, which ``jsonb`` keeps and every reader parses back as the same float.

    ``repr`` writes a float with a positive exponent exactly when its magnitude is at least
    ``1e16`` (its shortest digits reach the 17th place), so the magnitude is compared instead
    of building the text: the test ran once per float of every payload and was a third of
    the cost of encoding a list of floats."""
    return isinstance(value, float) and (-1e16 >= value or value >= 1e16)


def _dumps(payload: Any) -> str:
    """The stored text of a payload holding ``_exponent_float`` values: each is swapped for a
    marker string, the whole is dumped once, and the markers are put back in one pass over the
    text (``str.split`` on the marker's start). Linear in the size of the text: putting each
    back with its own ``str.replace`` scanned and copied the whole text once per float, and
    16,000 of them cost a minute of CPU."""
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

    # random per call: no text of the payload can hold it (a key or a string may look alike)
    marker = f"jtfloat-{secrets.token_hex(16)}-"
    parts = dumps(swap(payload)).split(f'"{marker}')
    written: dict[float, str] = {}  # a float repeated many times is written out once
    out = [parts[0]]
    for part in parts[1:]:  # each part starts with "<index>\"" and then the text after it
        end = part.index('"')
        value = found[int(part[:end])]
        text = written.get(value)
        if text is None:
            text = written[value] = format(Decimal(repr(value)), "f") + ".0"
        out.append(text)
        out.append(part[end + 1 :])
    return "".join(out)


#: json.dumps with these arguments builds a new encoder on every call; this one is built once
#: (the stored text is ``store.base.dumps``).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def encode(payload: Any, max_bytes: int) -> tuple[str, str]:
    """``(json text, hash)`` for a payload, or ``TypeError``/``ValueError`` naming the problem."""
    flags = _check(payload, "payload", 0)
    text = _dumps(payload) if flags & _EXPONENT else dumps(payload)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > max_bytes:
        raise ValueError(f"payload is {size} bytes once encoded; the limit is {max_bytes} bytes")
    # the hash is of the canonical text (sorted keys, plain floats): the stored text itself
    # when its keys are already sorted and no float needed writing out
    canonical = _CANONICAL.encode(payload) if flags else text
    known = _COMMON_HASHES.get(canonical)
    return text, known or hashlib.sha256(canonical.encode("utf-8")).hexdigest()


#: The hashes of the payloads many tasks carry (none, an empty object), computed once.
_COMMON_HASHES = {text: hashlib.sha256(text.encode("utf-8")).hexdigest() for text in ("null", "{}")}


def intent_key(*parts: Any) -> str:
    """A stable, high-entropy idempotency key from business identifiers and inputs.

    ``intent_key("note", 42, "publish", payload)`` is the same for the same parts and never
    carries the parts themselves (no prompts, e-mails or tokens end up in keys or logs).
    """
    if not parts:
        raise ValueError("intent_key() needs at least one part")
    _check(list(parts), "intent_key parts", 0)
    canonical = _CANONICAL.encode(list(parts))
    return "ik_" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
