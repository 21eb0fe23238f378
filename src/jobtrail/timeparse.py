"""Parsing of user-supplied times and durations (API arguments and CLI options)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, None: 1.0}


def parse_time(value: datetime | str, name: str) -> datetime:
    """An aware UTC datetime from a ``datetime`` (must be aware) or an ISO 8601 string
    (a string without an offset is read as UTC)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name} must be timezone-aware (e.g. datetime.now(UTC))")
        return value.astimezone(UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{name} is not an ISO 8601 time: {value!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    raise TypeError(f"{name} must be a datetime or an ISO 8601 string, not {type(value).__name__}")


def parse_duration(value: str | float | int | timedelta, name: str) -> float:
    """Seconds from ``90``, ``"90s"``, ``"30m"``, ``"2h"``, ``"7d"`` or a ``timedelta``."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise TypeError(f"{name} must be a duration")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"{name} is not a duration like 90s, 30m, 2h or 7d: {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise TypeError(f"{name} must be a duration, not {type(value).__name__}")
    if seconds != seconds or seconds < 0:
        raise ValueError(f"{name} must not be negative")
    return seconds


def looks_like_duration(value: str) -> bool:
    return bool(_DURATION.match(value))
