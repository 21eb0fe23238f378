"""The part of ``App`` for durable handlers' events: ``send_event`` stores an event and wakes
the tasks waiting for it (``core/suspension.py``). Held by ``App``."""

from __future__ import annotations

from typing import Any

from ..core import suspension
from .core import Part


class Events(Part):
    """``send_event``: the caller's side of ``ctx.wait_for_event``."""

    def send_event(self, key: str, payload: Any = None, *, tenant: str = "") -> int:
        """Store the event ``key`` of ``tenant`` with ``payload`` (JSON; the first payload for
        a key wins, a repeat changes nothing and reports 0) and move every task waiting for it
        ``waiting → queued`` (``event_received``) in the same transaction; returns how many
        tasks it woke. A task that waits for the key later finds the event at once."""
        return suspension.send_event(self._driver, key, payload, tenant=tenant)
