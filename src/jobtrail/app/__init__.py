"""The facade: ``App`` (``facade.py``) holds one part per concern and forwards each public
method to the part that owns it (``forward.py``). The parts, each a class named for its
concern: ``Enqueue`` (``enqueue.py``: enqueue, bulk enqueue), ``Reads`` (``reads.py``: get,
result, list, transitions, explain), ``Ops`` (``ops.py``: queues, limits, health, pruning, a
task's live facts), ``Rates`` (``rates.py``), ``Views`` (``views.py``: read helpers for people),
``Cron`` (``cron.py``), ``Effects`` (``effects.py``: receipts, outbox, workflows), ``Webhooks``
(``webhooks.py``), ``Actions`` (``actions.py``: cancel, force, annotate, dismiss), ``Replays``
(``replays.py``), ``Workers`` (``workers.py``: workers, sweep, check) and ``Async``
(``aio.py``: the async API). Each is given the ``Core`` (``core.py``: the driver, the
settings, the kind registry, enqueue validation, row reading) and, in its constructor, the
other parts it uses — so a part's imports and constructor say what it depends on."""

from .facade import App

__all__ = ["App"]
