"""Exceptions users raise (outcomes of a handler) and receive (refusals of the store).

Handlers signal outcomes with a category that is an enum, never a match on message text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import validate
from .machine import PERMANENT_CATEGORIES, TRANSIENT_CATEGORIES, ErrorCategory, State
from .urls import describe_url

if TYPE_CHECKING:
    from .models import Task


class JobtrailError(Exception):
    """Base class of everything jobtrail raises on purpose."""


def _category(
    value: ErrorCategory | str, allowed: frozenset[ErrorCategory], kind: str
) -> ErrorCategory:
    try:
        category = ErrorCategory(value)
    except ValueError:
        names = ", ".join(sorted(c.value for c in allowed))
        raise ValueError(
            f"unknown error category {value!r}; a {kind} error takes one of: {names}"
        ) from None
    if category not in allowed:
        names = ", ".join(sorted(c.value for c in allowed))
        raise ValueError(f"{category.value!r} is not a {kind} category; use one of: {names}")
    return category


class TransientError(JobtrailError):
    """The attempt failed for a reason that may pass: it is retried with backoff.

    ``retry_after`` (seconds) is honoured instead of the computed backoff, even above the cap,
    but never past the kind's ``max_elapsed`` budget.
    """

    def __init__(
        self,
        message: str = "",
        *,
        category: ErrorCategory | str = ErrorCategory.UNAVAILABLE,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.category = _category(
            category, TRANSIENT_CATEGORIES | {ErrorCategory.UNCLASSIFIED}, "transient"
        )
        if retry_after is not None:
            # finite and at most 100 years: an infinite one could not be stored as a due time
            try:
                retry_after = validate.seconds(retry_after, "retry_after")
            except ValueError:
                raise ValueError(
                    "retry_after must be a non-negative number of seconds, at most 100 years"
                ) from None
        self.retry_after = retry_after


class PermanentError(JobtrailError):
    """The attempt failed for a reason a retry cannot fix: the task goes to ``dead``."""

    def __init__(
        self, message: str = "", *, category: ErrorCategory | str = ErrorCategory.INVALID_INPUT
    ) -> None:
        super().__init__(message)
        self.category = _category(
            category, PERMANENT_CATEGORIES | {ErrorCategory.UNCLASSIFIED}, "permanent"
        )


class Snooze(JobtrailError):  # noqa: N818 - the public name is fixed by the spec
    """Not a failure: put the task back for ``seconds`` without counting the attempt."""

    def __init__(self, seconds: float) -> None:
        if seconds != seconds or seconds < 0:
            raise ValueError("Snooze needs a non-negative number of seconds")
        super().__init__(f"snoozed for {seconds}s")
        self.seconds = float(seconds)


class TaskFailed(JobtrailError):  # noqa: N818 - the public name is fixed by the spec
    """Raised by ``app.result`` for a task that ended ``dead`` or ``cancelled``: it
    has no result and never will. ``task`` is the snapshot read; ``state``, ``reason``,
    ``category`` and ``error`` are its state, last reason code, last error category and
    last error (``error_category`` is ``category`` under the name ``Transition`` and
    ``Task.last_error_category`` give it)."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.state = task.state
        self.reason = task.last_reason
        self.category = self.error_category = task.last_error_category
        self.error = task.last_error
        detail = f" ({self.category}: {self.error})" if self.error else ""
        super().__init__(f"task {task.id} ended {task.state.value} by {self.reason}{detail}")


class Cancelled(JobtrailError):  # noqa: N818
    """Raised at a boundary when the task's cancel was requested; the worker confirms it."""


class LeaseLost(JobtrailError):  # noqa: N818
    """This attempt no longer holds the task (expired, swept, taken over or force-fixed).

    The worker writes nothing further for the attempt; a newer attempt may be running.
    """


class IdempotencyConflict(JobtrailError):
    """The idempotency key already names a task with a different payload."""

    def __init__(self, task_id: str, key: str) -> None:
        super().__init__(
            f"idempotency key {key!r} already belongs to task {task_id} with a different payload; "
            "a changed input needs a new key"
        )
        self.task_id = task_id
        self.key = key


class IllegalTransition(JobtrailError):
    """The requested move is not an edge from the task's current state."""

    def __init__(self, task_id: str, current: State | str, attempted: str) -> None:
        super().__init__(f"task {task_id} is {current}: cannot {attempted}")
        self.task_id = task_id
        self.current_state = State(current)
        self.attempted = attempted


class TaskNotFound(JobtrailError, LookupError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"no task with id {task_id!r}")
        self.task_id = task_id


class UnknownKind(JobtrailError, LookupError):
    def __init__(self, kind: str, known: list[str] | None = None) -> None:
        hint = ""
        if known is not None:
            hint = (
                f"; registered kinds: {', '.join(sorted(known))}"
                if known
                else "; this App has no registered kinds (pass --app module:attr or set "
                "JOBTRAIL_APP)"
            )
        super().__init__(f"unknown task kind {kind!r}{hint}")
        self.kind = kind


class StoreUnavailable(JobtrailError):
    """The store could not be reached; nothing was written (or the outcome is unknown).

    ``stored`` says which: ``False`` when nothing was stored (the connection was refused, or
    the statement could not run on it), ``None`` when a connection broke after a write was
    sent, so whether it committed is unknown (an enqueue retried with the same idempotency
    key is stored once either way). The driver's own exception is the ``__cause__``.

    ``outage`` is ``False`` when the store answered but this statement could not run on the
    connection it was sent on (a transaction pooler the App was not told of handed it another
    server session; the App has switched to the pooler-safe behaviour and said so once): try
    again at once, nothing is away."""

    def __init__(self, *args: object, stored: bool | None = False, outage: bool = True) -> None:
        super().__init__(*args)
        self.stored = stored
        self.outage = outage


class SchemaMissing(StoreUnavailable):
    """The store answers but holds no jobtrail schema (or, for SQLite, no database file yet):
    nothing was read or written. A ``StoreUnavailable``, so code that answers "not now" (HTTP
    503, a worker's backoff) treats it alike; its message names the command that fixes it.

    ``App`` never creates or upgrades the schema by itself: ``app.migrate()`` or ``jobtrail
    migrate --db URL`` does (the CLI's worker, enqueue and serve run it for you)."""

    def __init__(self, url: str, detail: str = "") -> None:
        url = describe_url(url)  # the password masked, a SQLite path made absolute
        self.url = url
        self.command = f"jobtrail migrate --db {url}"
        if detail.startswith("no database file"):  # SQLite: nothing there at all
            what = detail
        else:
            what = f"the database {url} has no jobtrail schema" + (f" ({detail})" if detail else "")
        super().__init__(f"{what}; run `{self.command}` (or app.migrate()) first")


class WaitTimedOut(JobtrailError):  # noqa: N818 - the public name is fixed by the spec
    """Raised in a resumed handler by ``ctx.wait_for_event`` or ``ctx.join`` whose timeout
    passed first (the sweeper moved the task ``waiting → queued``, ``wait_timed_out``). Not a
    failure by itself: the handler may catch it and decide. ``what`` names the wait."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} timed out")
        self.what = what


class ChildFailed(JobtrailError):  # noqa: N818 - the public name is fixed by the spec
    """Raised by ``ctx.join`` when a child it waits for ended ``dead`` or ``cancelled``:
    ``task_id`` (the child's id), ``state`` and ``reason`` (its last reason code). The handler
    may catch it and decide the parent's outcome."""

    def __init__(self, task_id: str, state: State, reason: str | None) -> None:
        super().__init__(f"child task {task_id} ended {state.value} ({reason})")
        self.task_id = task_id
        self.state = state
        self.reason = reason


class NonDeterministic(PermanentError):
    """A resumed handler's recorded calls (steps, effects, sleeps, waits, spawns) came in
    another order than recorded: the task fails permanently (category ``invalid_input``),
    naming the first divergence ("expected step 'a', got 'b'")."""


class InvalidCall(PermanentError, ValueError):
    """A durable call made with bad arguments from inside a handler (an empty or repeated
    name, a bad duration, an unknown kind, ...): a ``ValueError`` that also fails the attempt
    permanently (``invalid_input``); nothing was written."""
