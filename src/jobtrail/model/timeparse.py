"""Parsing of user-supplied times and durations (API arguments and CLI options).

Durations are bounded (at most ``validate.MAX_DURATION``, 100 years) and times must lie where
both backends and Python's ``datetime`` can hold them, so that an absurd value is a
``ValueError`` naming the argument, never an ``OverflowError`` or a database error."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from . import validate

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, None: 1.0}


def parse_time(value: datetime | str, name: str, *, zone_required: bool = False) -> datetime:
    """An aware UTC datetime from a ``datetime`` (must be aware) or an ISO 8601 string
    (a string without an offset is read as UTC, or refused with ``zone_required``)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name} must be timezone-aware (e.g. datetime.now(UTC))")
        return _utc(value, name)
    if isinstance(value, str):
        validate.text(value, name)
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{name} is not an ISO 8601 time: {value!r}") from None
        if parsed.tzinfo is None:
            if zone_required:
                raise ValueError(f"{name} needs a time zone, e.g. 2026-11-29T10:00:00Z: {value!r}")
            parsed = parsed.replace(tzinfo=UTC)
        return _utc(parsed, name)
    raise TypeError(f"{name} must be a datetime or an ISO 8601 string, not {type(value).__name__}")


def _utc(value: datetime, name: str) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-01:00 is past the last datetime in UTC
        raise ValueError(f"{name} is out of range: {value.isoformat()}") from None


def parse_duration(value: str | float | int | timedelta, name: str) -> float:
    """Seconds from ``90``, ``"90s"``, ``"30m"``, ``"2h"``, ``"7d"`` or a ``timedelta``;
    at most 100 years."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise TypeError(f"{name} must be a duration")
    elif isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond any float
            seconds = float("inf")
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"{name} is not a duration like 90s, 30m, 2h or 7d: {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise TypeError(f"{name} must be a duration, not {type(value).__name__}")
    if seconds != seconds or seconds < 0:
        raise ValueError(f"{name} must not be negative")
    if seconds > validate.MAX_DURATION:  # inf included
        raise ValueError(f"{name} must be at most {validate.span(validate.MAX_DURATION)}")
    return seconds


def looks_like_duration(value: str) -> bool:
    return bool(_DURATION.match(value))
