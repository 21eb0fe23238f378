"""The outbox: messages committed with the completing transition, delivered after commit.

Delivery is at least once: a message is claimed for a while (``locked_until``), handed to every
sink of its topic, then marked delivered. A crash between the commit and the delivery leaves it
``pending`` and another dispatcher (any worker, or ``app.dispatch_outbox()``) sends it later;
until then queries show it as delivering, never as failed. The outbox id is the consumer's
dedup key (also sent as ``Idempotency-Key`` by the HTTP sink).
"""

from __future__ import annotations

import json
import logging
import random
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from ..model import validate
from ..store.base import Driver

log = logging.getLogger("jobtrail.services.outbox")

Sink = Callable[[int, str, Any], object]


def http_sink(url: str, *, timeout: float = 10.0, headers: dict[str, str] | None = None) -> Sink:
    """A sink that POSTs ``{"id", "topic", "payload"}`` as JSON; any non-2xx answer is a
    failed delivery that will be retried with backoff."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"an HTTP sink needs an http:// or https:// URL, not {url!r}")

    def deliver(message_id: int, topic: str, payload: Any) -> None:
        body = json.dumps({"id": message_id, "topic": topic, "payload": payload}).encode()
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Idempotency-Key": f"jobtrail-outbox-{message_id}",
                **(headers or {}),
            },
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            if not 200 <= response.status < 300:
                raise ConnectionError(f"sink answered HTTP {response.status}")

    return deliver


def retry_delay(attempts: int, rng: random.Random | None = None) -> float:
    """Full jitter, capped at five minutes."""
    return (rng or random).uniform(0.0, min(300.0, 0.5 * 2.0 ** min(attempts, 20)))


def dispatch(
    driver: Driver, sinks: dict[str, list[Sink]], *, limit: int = 100, lock_seconds: float = 30.0
) -> int:
    """One pass: deliver due pending messages; returns how many were delivered."""
    topics = sorted(t for t in sinks if t != "*")
    if not topics and "*" not in sinks:
        return 0
    with driver.transaction() as tx:
        # only topics this process can deliver: others stay for a process that has the sink
        rows = driver.outbox_claim(
            tx,
            limit=limit,
            lock_seconds=lock_seconds,
            any_topic="*" in sinks,
            topics=driver._list(topics),
        )
    delivered = 0
    for row in rows:
        targets = sinks.get(row["topic"], []) + sinks.get("*", [])
        error: str | None = None
        if not targets:
            error = f"no sink registered for topic {row['topic']!r} in this process"
        else:
            try:
                for sink in targets:
                    sink(row["id"], row["topic"], row["payload"])
            except Exception as exc:  # retried later; the payload never goes to the log
                error = validate.kept_text(f"{type(exc).__name__}: {exc}")[:500]
        with driver.transaction() as tx:
            if error is None:
                driver.outbox_delivered(tx, id=row["id"])
                delivered += 1
            else:
                log.warning(
                    "outbox message %s (topic %s) not delivered: %s", row["id"], row["topic"], error
                )
                driver.outbox_failed(
                    tx, id=row["id"], error=error, delay=retry_delay(row["attempts"])
                )
    return delivered
