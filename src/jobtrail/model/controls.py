"""The controls of one enqueue, checked: debounce (``debounce_key``, ``debounce``,
``debounce_max``), uniqueness windows (``unique_for``, ``unique_while``) and expiry
(``expires_in``, ``expires_at``). ``Controls.of`` turns the ``enqueue`` arguments (and the kind's
own options) into one value or refuses them with an error naming the argument; nothing here
touches the store."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from . import validate
from .timeparse import parse_time

#: The longest debounce, uniqueness window or expiry: ten years, as ``delay``.
MAX_SECONDS: Final = 10 * 365 * 86400
#: The longest debounce key (as an idempotency key).
MAX_KEY: Final = 255
#: The one value ``unique_while`` takes: unique until the task has ended.
UNIQUE_WHILE: Final = ("active",)
#: The ``enqueue`` options read here.
NAMES: Final = (
    "debounce_key",
    "debounce",
    "debounce_max",
    "unique_for",
    "unique_while",
    "expires_in",
    "expires_at",
)


def duration(value: Any, name: str, *, positive: bool = True) -> float:
    """Seconds (a number or a ``timedelta``), finite, above 0 (or at least 0), at most ten
    years; a ``TypeError`` for another type, a ``ValueError`` out of range, each naming
    ``name``."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        number = math.inf
    floor = "above 0" if positive else "at least 0"
    if not math.isfinite(number) or number < 0 or number > MAX_SECONDS or (positive and not number):
        raise ValueError(f"{name} must be a number of seconds {floor}, at most 10 years")
    return number


def key(value: Any, name: str) -> str:
    """A key: a non-empty string of at most 255 characters that both backends can store."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    if not value or len(value) > MAX_KEY:
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_KEY} characters")
    if "\x00" in value or not value.isascii():
        validate.text(value, name)
    return value


def unique_while(value: Any, name: str = "unique_while") -> bool:
    """``unique_while``: ``"active"`` (True) or None (False)."""
    if value is None:
        return False
    if value not in UNIQUE_WHILE or not isinstance(value, str):
        raise ValueError(f"{name} must be 'active' (unique until the task has ended) or None")
    return True


def kind_uniqueness(unique_for: Any, unique_while_: Any) -> tuple[float | None, bool]:
    """The checked ``@app.task(unique_for=..., unique_while=...)`` of a kind."""
    if unique_for is not None and unique_while_ is not None:
        raise ValueError("give unique_for or unique_while, not both")
    seconds = None if unique_for is None else duration(unique_for, "unique_for")
    return seconds, unique_while(unique_while_)


@dataclass(frozen=True, slots=True)
class Controls:
    """What one enqueue asks beyond a plain task (all None/False: nothing)."""

    debounce_key: str | None = None
    debounce: float | None = None
    debounce_max: float | None = None
    unique_for: float | None = None
    unique_active: bool = False
    expires_in: float | None = None
    expires_at: datetime | None = None

    @staticmethod
    def of(
        args: dict[str, Any],
        *,
        has_key: bool,
        kind_unique_for: float | None = None,
        kind_unique_active: bool = False,
        now: datetime | None = None,
    ) -> Controls | None:
        """The controls of ``args`` (``enqueue``'s arguments), or None when it asks for none.
        ``has_key``: the enqueue has an idempotency key (the kind's uniqueness applies only
        then)."""
        get = args.get
        d_key, d_s, d_max = get("debounce_key"), get("debounce"), get("debounce_max")
        u_for, u_while = get("unique_for"), get("unique_while")
        e_in, e_at = get("expires_in"), get("expires_at")
        if (
            d_key is None
            and d_s is None
            and d_max is None
            and u_for is None
            and u_while is None
            and e_in is None
            and e_at is None
            and kind_unique_for is None
            and not kind_unique_active
        ):
            return None
        debounce = debounce_max = None
        if d_key is not None:
            d_key = key(d_key, "debounce_key")
        if d_s is not None:
            debounce = duration(d_s, "debounce", positive=False)
        if d_max is not None:
            debounce_max = duration(d_max, "debounce_max", positive=False)
        if d_key is None and (debounce is not None or debounce_max is not None):
            name = "debounce" if debounce is not None else "debounce_max"
            raise ValueError(f"{name} needs a debounce_key (the tasks it folds together)")
        if d_key is not None and debounce is None:
            raise ValueError("debounce_key needs debounce (seconds to wait for more)")
        if debounce is not None and debounce_max is not None and debounce_max < debounce:
            raise ValueError(
                f"debounce_max ({debounce_max:g}s) must be at least debounce ({debounce:g}s)"
            )
        unique_for = None
        if u_for is not None:
            unique_for = duration(u_for, "unique_for")
        active = unique_while(u_while)
        if unique_for is not None and u_while is not None:
            raise ValueError("give unique_for or unique_while, not both")
        if (unique_for is not None or u_while is not None) and not has_key:
            name = "unique_for" if unique_for is not None else "unique_while"
            raise ValueError(f"{name} needs an idempotency_key (the key it keeps unique)")
        if unique_for is None and u_while is None and has_key:
            unique_for, active = kind_unique_for, kind_unique_active
        if d_key is not None and has_key:
            raise ValueError("give debounce_key or idempotency_key, not both")
        expires_in = expires_at = None
        if e_in is not None and e_at is not None:
            raise ValueError("give expires_in or expires_at, not both")
        if e_in is not None:
            expires_in = duration(e_in, "expires_in")
        if e_at is not None:
            if isinstance(e_at, str) and e_at.strip() and not _has_zone(e_at):
                raise ValueError(
                    f"expires_at needs a time zone, e.g. 2026-11-29T10:00:00Z: {e_at!r}"
                )
            expires_at = parse_time(e_at, "expires_at")
            if expires_at <= (now or datetime.now(UTC)):
                raise ValueError(f"expires_at is in the past: {expires_at.isoformat()}")
        controls = Controls(
            d_key, debounce, debounce_max, unique_for, active, expires_in, expires_at
        )
        return None if controls == _NONE else controls


_NONE: Final = Controls()


def _has_zone(text: str) -> bool:
    """Whether an ISO 8601 string names its offset (``Z`` or ``+hh:mm``)."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return True  # parse_time names the malformed time
    return parsed.tzinfo is not None
