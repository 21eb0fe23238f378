"""The worker, by concern: ``pump.py`` (the claim loop: where a claim is built and batched
successes are committed with the next claim), ``handlers.py`` (the handler pool and the event
loop), ``outcomes.py`` (writing an attempt's outcome), ``lease.py`` (lease renewal and
timeouts), ``pool.py`` (threads and the completion batch), ``presence.py`` (the heartbeat row
that lists it as a live worker), ``options.py`` (settings and the collaborators
``App.run_worker`` passes in).

``jobtrail.worker.Worker`` runs a worker; ``jobtrail.Worker`` (``model.models``) is the
read-only snapshot of a live one that ``app.workers()`` returns."""

from .options import Collaborators, WorkerOptions, make_owner_id
from .pool import OutcomeNotRecorded
from .pump import Worker

__all__ = ["Collaborators", "OutcomeNotRecorded", "Worker", "WorkerOptions", "make_owner_id"]
