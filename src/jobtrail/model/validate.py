"""Checks for input that every caller (Python, HTTP, CLI, dashboard) shares.

One rule for bad input: a ``ValueError`` (or ``TypeError`` for a wrong type) whose message
names the field, raised before anything is read or written, so that both backends answer alike
— PostgreSQL cannot store a NUL and answers an out-of-range number with its own error, SQLite
would store the one and overflow on the other. The HTTP layer turns these into 422 and the
CLI into exit 2. The bounds are the documented input limits (docs/security.md).
"""

from __future__ import annotations

import math
import re
from typing import Any

from .machine import Reason

#: The most rows one read may ask for (``App.list``, queue history, ``GET /api/tasks``' own
#: bound is lower).
MAX_LIMIT = 10_000
#: The most dead tasks one batch replay or its preview may name with ``limit``.
MAX_BATCH = 1_000_000
#: A concurrency limit above this is no limit at all (and PostgreSQL's INTEGER ends at 2**31).
MAX_CONCURRENCY_LIMIT = 1_000_000
#: The longest duration anywhere (ages, windows, ``since``): 100 years in seconds.
MAX_DURATION = 100 * 365.25 * 86400
#: The longest operator name or note (``by``, ``note``), as the HTTP bodies document.
MAX_NOTE = 10_000
#: A task's priority and attempt count are PostgreSQL INTEGERs: priority from -MAX_PRIORITY to
#: MAX_PRIORITY, max_attempts from 1 to MAX_ATTEMPTS (for a kind and for one task alike).
MAX_PRIORITY = MAX_ATTEMPTS = 2**31 - 1
#: A worker's options (``run_worker``, ``start_worker``, ``jobtrail worker``): numbers past
#: these are typos, not configurations — handler slots, tasks held ahead of them, seconds
#: between idle polls, seconds running handlers get to finish at a stop.
MAX_CONCURRENCY, MAX_PREFETCH = 1000, 10_000
MAX_POLL, MAX_GRACE = 3600.0, 86400.0
#: Replays a second in a batch replay: at least one in 1000 s, at most a million a second.
MIN_RATE, MAX_RATE = 0.001, 1_000_000.0

# a lone surrogate is not text: neither backend can encode it (argv's undecodable bytes
# arrive as U+DC80..U+DCFF, a JSON body's "\ud800" as itself)
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def text(value: Any, name: str) -> None:
    """Refuse a NUL character or a lone surrogate in ``value`` (when it is a string)."""
    if isinstance(value, str) and (found := _BAD_TEXT.search(value)) is not None:
        if found.group() == "\x00":
            raise ValueError(f"{name} contains a NUL character")
        raise ValueError(f"{name} is not valid Unicode text (a lone surrogate or undecodable byte)")


def kept_text(value: str) -> str:
    """Text a handler's failure hands us (an exception's message, a traceback) as both backends
    can keep it: a NUL written as ``\\x00`` and a lone surrogate as its ``\\udXXX`` escape
    (PostgreSQL refused the row, so the failure itself was not recorded; SQLite kept the NUL).
    Diagnostic text is kept, not refused."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    if not value.isascii():
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def filter_text(value: Any, name: str, *, max_length: int = 1024) -> None:
    """A list filter (``kind``, ``queue``, ``tenant``, a search key): ``None`` or text."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    if len(value) > max_length:
        raise ValueError(f"{name} is longer than {max_length} characters")
    text(value, name)


def integer(value: Any, name: str, low: int, high: int) -> int:
    """An ``int`` (not a ``bool``) in ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer between {low} and {high}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}")
    return value


def seconds(value: Any, name: str, *, positive: bool = False, high: float = MAX_DURATION) -> float:
    """A finite number of seconds from 0 (above 0 when ``positive``) to ``high`` (default
    100 years)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds")
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        number = math.inf
    if not math.isfinite(number) or number < 0 or number > high or (positive and number == 0):
        floor = "above 0" if positive else "at least 0"
        raise ValueError(f"{name} must be {floor} and at most {span(high)}")
    return number


def span(high: float) -> str:
    """A bound in words: ``100 years`` for ``MAX_DURATION``, else seconds."""
    return "100 years (36525d)" if high == MAX_DURATION else f"{high:g} seconds"


def rate(value: Any, name: str) -> float:
    """A pace in events a second, from ``MIN_RATE`` to ``MAX_RATE``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not MIN_RATE <= number <= MAX_RATE:  # NaN fails too
        raise ValueError(f"{name} must be between {MIN_RATE:g} and {MAX_RATE:g} a second")
    return number


def batch_filters(*, reason: Any, kind: Any, limit: Any) -> None:
    """The filters of a batch replay and its preview: a known reason code, a kind, and a
    ``limit`` of 1..``MAX_BATCH``."""
    filter_text(kind, "kind")
    filter_text(reason, "reason")
    if reason is not None:
        try:
            Reason(reason)
        except ValueError:
            raise ValueError(f"unknown reason code {reason!r}") from None
    if limit is not None:
        integer(limit, "limit", 1, MAX_BATCH)


#: the longest concurrency key (as an idempotency key)
MAX_KEY = 255
#: the largest ``concurrency_per_key`` (the claim counts a key's tasks up to it)
MAX_PER_KEY = 1000


def concurrency_key(value: Any) -> str:
    """A concurrency key: a non-empty string of at most ``MAX_KEY`` characters."""
    if not isinstance(value, str):
        raise TypeError(f"concurrency_key must be a string, not {type(value).__name__}")
    if not value or len(value) > MAX_KEY:
        raise ValueError(
            f"concurrency_key must be a non-empty string of at most {MAX_KEY} characters"
        )
    text(value, "concurrency_key")
    return value


def concurrency_per_key(value: Any, kind: str) -> None:
    """The kind option ``concurrency_per_key``: ``None`` (1) or an integer from 1."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"kind {kind!r}: concurrency_per_key must be an integer from 1 to "
            f"{MAX_PER_KEY}, not {type(value).__name__}"
        )
    if not 1 <= value <= MAX_PER_KEY:
        raise ValueError(f"kind {kind!r}: concurrency_per_key must be from 1 to {MAX_PER_KEY}")
