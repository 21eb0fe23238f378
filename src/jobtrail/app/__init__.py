"""The facade: ``App`` (``facade.py``) and its concerns, each a class ``App`` is made of —
``enqueue.py`` (enqueue, bulk enqueue), ``reads.py`` (get, result, list, transitions, explain),
``ops.py`` (queues, limits, dead letters, pruning), ``views.py`` (read helpers for people),
``cron.py``, ``effects.py`` (receipts, outbox, workflows), ``webhooks.py``, ``actions.py``
(cancel, force, annotate, dismiss), ``replays.py``, ``aio.py`` (the async API), ``workers.py``
(workers, sweep, check) — all built on ``core.py`` (the kind registry, enqueue validation, row
reading). A concern that uses another's methods inherits it, so no class declares what it
hopes to find on ``App``."""

from .facade import App

__all__ = ["App"]
