"""The facade: ``App`` (``facade.py``) and its concerns, each a class ``App`` is made of —
``ops.py`` (queues, limits, dead letters, pruning), ``views.py`` (read helpers for people),
``cron.py``, ``effects.py`` (receipts, outbox, workflows), ``webhooks.py``, ``actions.py``
(cancel, force, annotate, dismiss), ``aio.py`` (the async API), ``workers.py`` (workers, sweep,
check) — all built on ``core.py`` (the kind registry, enqueue validation, row reading)."""

from .facade import App

__all__ = ["App"]
