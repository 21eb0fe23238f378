"""jobtrail — durable background tasks whose every state can be explained.

A task is a row in exactly one state; every change is a conditional update along an allowed
edge (``jobtrail.model.machine.EDGES``) that appends a transition with a stable reason code.
"""

from .app import App
from .core.context import Context
from .core.payloads import intent_key
from .model.errors import (
    Cancelled,
    ChildFailed,
    IdempotencyConflict,
    IllegalTransition,
    JobtrailError,
    LeaseLost,
    PermanentError,
    SchemaMissing,
    Snooze,
    StoreUnavailable,
    TaskFailed,
    TaskNotFound,
    TransientError,
    UnknownKind,
    WaitTimedOut,
)
from .model.machine import EDGES, Actor, Edge, ErrorCategory, Reason, State
from .model.models import CancelResult, Task, Transition, Worker

__version__ = "0.3.0.dev0"  # pyproject.toml reads it; CHANGELOG.md says what changed

__all__ = [
    "EDGES",
    "Actor",
    "App",
    "CancelResult",
    "Cancelled",
    "ChildFailed",
    "Context",
    "Edge",
    "ErrorCategory",
    "IdempotencyConflict",
    "IllegalTransition",
    "JobtrailError",
    "LeaseLost",
    "PermanentError",
    "Reason",
    "SchemaMissing",
    "Snooze",
    "State",
    "StoreUnavailable",
    "Task",
    "TaskFailed",
    "TaskNotFound",
    "TransientError",
    "Transition",
    "UnknownKind",
    "WaitTimedOut",
    "Worker",
    "__version__",
    "intent_key",
]
