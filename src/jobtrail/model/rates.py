"""Rate limits as arithmetic: a token bucket per queue and per (queue, tenant),
and the ramp that grows the allowed rate from a tenth to the full rate.

Pure functions of a queue row's rate columns and the database's current time, so the claim
(``store/base.py``, one code path for both backends) and ``explain`` decide alike.

- The bucket holds ``burst`` tokens (default: one second's worth, ``per_second``), at least 1;
  it refills at the allowed rate; each claim takes one token. In any window of ``w`` seconds a
  queue therefore starts at most ``capacity + rate * w`` tasks.
- The allowed rate during a ramp is ``rate * (0.1 + 0.9 * elapsed / ramp)`` and the bucket's
  capacity shrinks by the same factor, so a ramp does not open with a full burst.
- A rate with ``rate_until`` (set by ``resume(ramp=...)`` on a queue without a rate) ends then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: the share of the full rate a ramp starts from
RAMP_START = 0.1


@dataclass(frozen=True)
class Rate:
    per_second: float | None
    per_tenant: float | None
    burst: int | None
    ramp_seconds: float | None
    ramp_started_at: datetime | None

    def share(self, now: datetime) -> float:
        """The part of the full rate allowed at ``now`` (1.0 outside a ramp)."""
        if self.ramp_seconds is None or self.ramp_started_at is None:
            return 1.0
        elapsed = (now - self.ramp_started_at).total_seconds()
        if elapsed >= self.ramp_seconds:
            return 1.0
        return RAMP_START + (1.0 - RAMP_START) * max(0.0, elapsed) / self.ramp_seconds

    def capacity(self, full: float, now: datetime) -> float:
        base = float(self.burst) if self.burst is not None else full
        return max(1.0, base * self.share(now))


def of(row: dict[str, Any] | None, now: datetime) -> Rate | None:
    """The rate in force on a queue row at ``now``; ``None`` when there is none."""
    if not row or (row.get("rate_per_second") is None and row.get("rate_per_tenant") is None):
        return None
    until = row.get("rate_until")
    if until is not None and now >= until:
        return None
    return Rate(
        per_second=row.get("rate_per_second"),
        per_tenant=row.get("rate_per_tenant"),
        burst=row.get("rate_burst"),
        ramp_seconds=row.get("ramp_seconds"),
        ramp_started_at=row.get("ramp_started_at"),
    )


def of_kind(row: dict[str, Any]) -> Rate:
    """The rate of one kind within a queue (a ``jobtrail_kind_rates`` row): a bucket of
    ``burst`` tokens (default one second's worth) refilled at ``per_second``, without a ramp."""
    return Rate(
        per_second=row["per_second"],
        per_tenant=None,
        burst=row.get("burst"),
        ramp_seconds=None,
        ramp_started_at=None,
    )


def tokens(
    rate: Rate, full: float, left: float | None, at: datetime | None, now: datetime
) -> float:
    """The tokens in a bucket of full rate ``full`` at ``now``, from ``left`` at ``at`` (a new
    bucket, ``left is None``, starts full). The refill uses the allowed rate halfway between
    ``at`` and ``now``, so a ramp's growth is followed."""
    cap = rate.capacity(full, now)
    if left is None or at is None:
        return cap
    elapsed = max(0.0, (now - at).total_seconds())
    middle = at + (now - at) / 2
    return min(cap, left + elapsed * full * rate.share(middle))


def room(value: float) -> int:
    """Whole claims a bucket holding ``value`` tokens allows now."""
    return max(0, math.floor(value + 1e-9))


def next_slot(rate: Rate, full: float, value: float, now: datetime) -> float:
    """Seconds until a bucket holding ``value`` tokens has a whole one (0 when it has)."""
    if value >= 1.0 - 1e-9:
        return 0.0
    return (1.0 - value) / (full * rate.share(now))


def full_until(rate: Rate, full: float) -> float:
    """Seconds after which an untouched bucket is full again (so its row may be forgotten)."""
    base = float(rate.burst) if rate.burst is not None else full
    return max(1.0, base) / (full * RAMP_START)
