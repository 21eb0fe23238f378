"""Webhook events as tasks: ``@app.webhook(source)`` and the receiving side that the HTTP
server calls once a delivery's signature is verified. Held by ``App``.

A delivery is recorded under ``(source, delivery id)`` in the SAME transaction that enqueues its
event task (kind ``webhook.<source>``, payload = the parsed JSON event), so a repeat delivery
finds the record and answers with the same task id, changing nothing.

A source may confirm receipts: ``@app.webhook("pay", receipt=fn)`` where
``fn(event) -> (receipt_id, ok, category, error) | None``. The event task calls it when it runs
(not in the HTTP request, so the answer stays fast and the confirmation is retried like any
task) and then ``confirm_receipt(receipt_id=..., ok=..., by="webhook:<source>", tenant=...)``.

A source may map a delivery to a durable handler's event: ``@app.webhook("mail",
event_key=fn)`` where ``fn(event) -> str | None`` names the event key (``None``: this delivery
is no such event). The event (payload: the delivery's JSON) is stored and every task of the
source's tenant waiting for that key is woken in the HTTP request, BEFORE the delivery is
recorded: a crash between the two leaves the delivery unrecorded, so the sender's retry sends
the event again, which changes nothing (the first payload for a key wins) and then records the
delivery. A mapping that raises or names a bad key records nothing and is a ``ValueError``
naming the source (the sender may retry once the code is fixed).

Trust (docs/security.md). A webhook task stands for a delivery whose signature was verified, so only
``receive_webhook`` makes one: ``enqueue``, ``enqueue_many``, workflows, the CLI and
``POST /api/tasks`` refuse every kind ``webhook.<source>`` (``refuse_webhook_kind``). And a
source belongs to one tenant (``@app.webhook(source, tenant=...)``, default ``""``, the tasks of
no tenant): its event tasks carry that tenant, and their receipt mapping settles only receipts
awaited by tasks of that same tenant — another tenant's receipt is not found, exactly like one
that does not exist, and the event task goes ``dead`` for a person to look at. The secret of a
source is what identifies its sender, so a provider that serves several tenants gets one source
(and one secret) per tenant.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ..core import suspension
from ..model.errors import IllegalTransition, PermanentError, TaskNotFound
from ..model.oneline import one_line
from ..store.base import NewTask
from .core import WEBHOOK_HANDLER, WEBHOOK_PREFIX, Core, Part
from .effects import Effects

log = logging.getLogger("jobtrail.webhooks")

F = TypeVar("F", bound=Callable[..., Any])
ReceiptMap = Callable[[Any], "tuple[str, bool, str | None, str | None] | None"]
EventKeyMap = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Delivery:
    """What receiving one verified delivery did. ``task_id`` is ``None`` only for a body that
    was not JSON (``bad_body``: it is kept in ``jobtrail_webhook_deliveries.bad_body``)."""

    task_id: str | None
    duplicate: bool
    bad_body: bool = False
    #: The event key the source's ``event_key`` mapped the delivery to (``None``: none), and
    #: how many waiting tasks sending it woke (0 for a repeat).
    event_key: str | None = None
    woken: int = 0


#: Task kinds that start with this are webhook kinds: made only by ``receive_webhook``.
def webhook_kind(source: str) -> str:
    return f"{WEBHOOK_PREFIX}{source}"


class Webhooks(Part):
    """``@app.webhook`` and the receiving side; owns the tenant of each source. Given
    ``Effects``: an event's receipt is confirmed through ``confirm_receipt``."""

    def __init__(self, core: Core, effects: Effects) -> None:
        super().__init__(core)
        self._effects = effects
        self._webhook_tenants: dict[str, str] = {}  # the tenant of each source
        self._event_keys: dict[str, EventKeyMap] = {}  # the event key mapping of a source

    def webhook(
        self,
        source: str,
        *,
        receipt: ReceiptMap | None = None,
        event_key: EventKeyMap | None = None,
        tenant: str = "",
        **task_options: Any,
    ) -> Callable[[F], F]:
        """Register ``fn(ctx, event)`` as the handler of ``source``'s event tasks (kind
        ``webhook.<source>``). ``receipt(event)`` may map an event to ``(receipt_id, ok,
        category, error)`` (or ``None``): the task confirms that receipt before calling ``fn``.
        ``event_key(event)`` may map a delivery to an event key (or ``None``): the event is
        sent (``send_event``, payload: the event) when the delivery arrives, waking the tasks
        of the source's tenant that wait for it.
        ``tenant`` is the tenant the source belongs to: its event tasks carry it, and their
        receipt mapping reaches only receipts of that tenant's tasks (default ``""``: the tasks
        of no tenant). Other keyword arguments are ``@app.task``'s options."""
        _check_source(source)
        _check_tenant(tenant)
        if event_key is not None and not callable(event_key):
            raise TypeError("event_key must be a function of the event returning a key or None")

        def register(fn: F) -> F:
            def handle(ctx: Any, event: Any) -> Any:
                if receipt is not None:
                    # the tenant stored with the event task, which only the route made
                    self._confirm_from_event(source, receipt, event, ctx.task.tenant)
                return fn(ctx, event)

            handle.__name__ = getattr(fn, "__name__", "webhook")
            handle.__module__ = getattr(fn, "__module__", __name__)
            setattr(handle, WEBHOOK_HANDLER, True)
            self._core.task(webhook_kind(source), **task_options)(handle)
            self._webhook_tenants[source] = tenant
            if event_key is not None:
                self._event_keys[source] = event_key
            else:
                self._event_keys.pop(source, None)
            return fn

        return register

    def webhook_sources(self) -> list[str]:
        """Sources with a registered ``@app.webhook`` handler."""
        prefix = webhook_kind("")
        return sorted(k[len(prefix) :] for k in self._core._kinds if k.startswith(prefix))

    def receive_webhook(
        self, source: str, delivery_id: str, body: bytes, *, event_type: str | None = None
    ) -> Delivery:
        """Record one delivery whose signature the caller has verified, and enqueue its event
        task in the same transaction. A repeat ``(source, delivery_id)`` returns the first
        answer with ``duplicate=True``. A body that is not JSON is kept (``bad_body``).

        The one way a webhook task is made (docs/security.md); it carries the source's tenant."""
        _check_source(source)
        if not isinstance(delivery_id, str) or not delivery_id or len(delivery_id) > 255:
            raise ValueError("a webhook delivery id must be a non-empty string of ≤ 255 chars")
        new: NewTask | None = None
        bad: str | None = None
        try:  # JSON that is no acceptable payload (too deep, NUL text…) is kept like non-JSON
            event: Any = json.loads(body)
            new = self._core._new_task(
                {
                    "kind": webhook_kind(source),
                    "payload": event,
                    "idempotency_key": delivery_key(source, delivery_id),
                    "tenant": self._webhook_tenants.get(source, ""),
                },
                webhook_route=True,
            )
        except (ValueError, TypeError, RecursionError):
            event, bad = None, body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        if event_type is None and isinstance(event, dict) and isinstance(event.get("type"), str):
            event_type = event["type"]
        if event_type is not None:
            event_type = event_type[:255]
        event_key, woken = self._send_event(source, event if bad is None else None)
        key = {"source": source, "delivery_id": delivery_id}
        with self._driver.transaction() as tx:
            fresh = self._driver.webhook_delivery_insert(
                tx, {**key, "event_type": event_type, "bad_body": bad}
            )
            if fresh is None:
                row = self._driver.webhook_delivery_get(tx, key)
                assert row is not None
                task_id = None if row["task_id"] is None else str(row["task_id"])
                result = Delivery(task_id, True, row["bad_body"] is not None)
            elif new is None:
                result = Delivery(None, False, True)
            else:
                task = self._core._insert(tx, new)
                self._driver.webhook_delivery_set_task(tx, {**key, "task_id": int(task.id)})
                result = Delivery(task.id, False)
        if result.task_id is not None and not result.duplicate:
            self._driver.wake()
        if event_key is not None:
            result = replace(result, event_key=event_key, woken=woken)
        outcome = "duplicate" if result.duplicate else "bad_body" if result.bad_body else "queued"
        log.info(
            "webhook source=%s delivery=%s event=%s task=%s outcome=%s%s",
            source,
            one_line(delivery_id),
            None if event_type is None else one_line(event_type),
            result.task_id,
            outcome,
            "" if event_key is None else f" event_key={one_line(event_key)} woken={woken}",
        )
        return result

    def _send_event(self, source: str, event: Any) -> tuple[str | None, int]:
        """The source's ``event_key`` mapping of a parsed delivery, and the event sent: ``(key,
        woken)``, or ``(None, 0)`` when the source has no mapping, the body was not JSON or
        the mapping said ``None``. A mapping that raises or returns no valid key is a
        ``ValueError`` naming the source; nothing is written then."""
        mapping = self._event_keys.get(source)
        if mapping is None or event is None:
            return None, 0
        try:
            key = mapping(event)
        except Exception as exc:
            log.warning("webhook source=%s: event_key raised %s", source, type(exc).__name__)
            raise ValueError(
                f"webhook source {source!r}: its event_key mapping raised "
                f"{type(exc).__name__}: {one_line(str(exc))}"
            ) from exc
        if key is None:
            return None, 0
        if not isinstance(key, str):
            raise ValueError(
                f"webhook source {source!r}: event_key must return a string or None, "
                f"not {type(key).__name__}"
            )
        try:
            woken = suspension.send_event(
                self._driver,
                key,
                event,
                tenant=self._webhook_tenants.get(source, ""),
                actor=f"webhook:{source}",
            )
        except (ValueError, TypeError) as exc:
            raise ValueError(f"webhook source {source!r}: event_key gave {exc}") from exc
        return key, woken

    def _confirm_from_event(
        self, source: str, receipt: ReceiptMap, event: Any, tenant: str
    ) -> None:
        mapped = receipt(event)
        if mapped is None:
            return
        receipt_id, ok, category, error = mapped
        try:
            self._effects.confirm_receipt(
                receipt_id=str(receipt_id),
                ok=bool(ok),
                category=category,
                error=error,
                by=f"webhook:{source}",
                tenant=tenant,
            )
        except TaskNotFound as exc:
            raise PermanentError(f"webhook {source}: {exc}") from exc
        except IllegalTransition as exc:  # already decided (e.g. by the sweeper): nothing to do
            log.info("webhook source=%s receipt already settled: %s", source, exc)


def _check_tenant(tenant: Any) -> None:
    if not isinstance(tenant, str) or len(tenant) > 255 or "\x00" in tenant:
        raise ValueError("a webhook source's tenant is a string of at most 255 characters, no NUL")


def delivery_key(source: str, delivery_id: str) -> str:
    """The idempotency key of a delivery's event task: ``webhook:<source>:<id>``, readable,
    while it fits the 255 characters a key may have; past that ``webhook:<source>:sha256:<hex>``
    of the whole id, so two long ids never share a key (a cut key made the second of two ids
    with a common 244-character start a conflict for ever)."""
    key = f"webhook:{source}:{delivery_id}"
    if len(key) <= 255:
        return key
    digest = hashlib.sha256(delivery_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"webhook:{source}:sha256:{digest}"


def _check_source(source: Any) -> None:
    if (
        not isinstance(source, str)
        or not source
        or len(source) > 64
        or not all(c.isalnum() or c in "-_" for c in source)
    ):
        raise ValueError("a webhook source is a name of letters, digits, '-' and '_' (≤ 64)")
