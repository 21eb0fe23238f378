"""jobtrail — durable background tasks whose every state can be explained.

A task is a row in exactly one state; every change is a conditional update along an allowed
edge (``jobtrail.machine.EDGES``) that appends a transition with a stable reason code.
"""

from .app import App
from .context import Context
from .errors import (
    Cancelled,
    IdempotencyConflict,
    IllegalTransition,
    JobtrailError,
    LeaseLost,
    PermanentError,
    Snooze,
    StoreUnavailable,
    TaskNotFound,
    TransientError,
    UnknownKind,
)
from .machine import EDGES, Actor, Edge, ErrorCategory, Reason, State
from .models import CancelResult, Task, Transition
from .payloads import intent_key

__version__ = "0.1.0"

__all__ = [
    "EDGES",
    "Actor",
    "App",
    "CancelResult",
    "Cancelled",
    "Context",
    "Edge",
    "ErrorCategory",
    "IdempotencyConflict",
    "IllegalTransition",
    "JobtrailError",
    "LeaseLost",
    "PermanentError",
    "Reason",
    "Snooze",
    "State",
    "StoreUnavailable",
    "Task",
    "TaskNotFound",
    "TransientError",
    "Transition",
    "UnknownKind",
    "__version__",
    "intent_key",
]
