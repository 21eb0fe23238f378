"""The state machine as data: states, reason codes, error categories and the edge table.

Everything else in jobtrail consults this module; it imports nothing of ours. A newcomer who
wants to know "where does a task become dead?" greps ``EDGES`` and then the one transition path
(``jobtrail.core.transition.apply``). The README's state diagram and reason-code table are generated
from here (``python -m tools.docs``) and a test fails when they drift.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class State(enum.StrEnum):
    QUEUED = "queued"
    LEASED = "leased"
    AWAITING_RECEIPT = "awaiting_receipt"
    CANCEL_REQUESTED = "cancel_requested"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    DEAD = "dead"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({State.SUCCEEDED, State.CANCELLED, State.DEAD})
#: ``State(text)`` as a dict lookup (the enum call costs more, on every row read)
STATE_OF: dict[str, State] = {s.value: s for s in State}
#: States in which a worker holds a lease (owner, expiry, attempt).
HELD = frozenset({State.LEASED, State.CANCEL_REQUESTED})


class Reason(enum.StrEnum):
    """Stable reason codes. A released code never changes meaning; new situations get new codes."""

    ENQUEUED = "enqueued"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    RETRY_SCHEDULED = "retry_scheduled"
    SNOOZED = "snoozed"
    PERMANENT_ERROR = "permanent_error"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    RETRY_BUDGET_EXHAUSTED = "retry_budget_exhausted"
    LEASE_EXPIRED = "lease_expired"
    LEASE_EXPIRED_EFFECT_UNCERTAIN = "lease_expired_effect_uncertain"
    SUBMITTED = "submitted"
    RECEIPT_CONFIRMED = "receipt_confirmed"
    RECEIPT_FAILED = "receipt_failed"
    RECEIPT_TIMEOUT = "receipt_timeout"
    CANCELLED_BEFORE_START = "cancelled_before_start"
    CANCEL_REQUESTED = "cancel_requested"
    CANCEL_CONFIRMED = "cancel_confirmed"
    CANCEL_TOO_LATE = "cancel_too_late"
    LEASE_EXPIRED_CANCELLED = "lease_expired_cancelled"
    FAILED_AFTER_CANCEL = "failed_after_cancel"
    REPLAYED = "replayed"
    CHILDREN_SUCCEEDED = "children_succeeded"
    CHILDREN_CANCELLED = "children_cancelled"
    CHILD_DEAD = "child_dead"
    MANUAL_FIX = "manual_fix"
    CORRECTION = "correction"
    CANCEL_REFUSED_SUBMITTED = "cancel_refused_submitted"
    RECEIPT_REQUERIED = "receipt_requeried"
    DISMISSED = "dismissed"
    # Durable handlers: a handler suspends partway and resumes later from the top.
    SLEEPING = "sleeping"
    WAITING_FOR_EVENT = "waiting_for_event"
    WAITING_FOR_CHILDREN = "waiting_for_children"
    EVENT_RECEIVED = "event_received"
    CHILDREN_FINISHED = "children_finished"
    WAIT_TIMED_OUT = "wait_timed_out"
    CANCELLED_WHILE_SUSPENDED = "cancelled_while_suspended"
    CANCELLED_AFTER_EFFECTS = "cancelled_after_effects"
    DEBOUNCED = "debounced"
    EXPIRED = "expired"
    # Cron windows that were deliberately not run (recorded on the window, not on a task).
    WINDOW_SKIPPED_CATCH_UP_BOUND = "window_skipped_catch_up_bound"
    WINDOW_SKIPPED_PAUSED = "window_skipped_paused"


class Actor(enum.StrEnum):
    CALLER = "caller"
    WORKER = "worker"
    SWEEPER = "sweeper"
    OPERATOR = "operator"
    SYSTEM = "system"
    ANY = "any"


class ErrorCategory(enum.StrEnum):
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    CONFLICT = "conflict"
    INVALID_INPUT = "invalid_input"
    NOT_FOUND = "not_found"
    UNAUTHORIZED = "unauthorized"
    UNCLASSIFIED = "unclassified"

    @property
    def transient(self) -> bool:
        return self in TRANSIENT_CATEGORIES

    @property
    def permanent(self) -> bool:
        return self in PERMANENT_CATEGORIES


TRANSIENT_CATEGORIES = frozenset(
    {
        ErrorCategory.TIMEOUT,
        ErrorCategory.RATE_LIMITED,
        ErrorCategory.UNAVAILABLE,
        ErrorCategory.CONFLICT,
    }
)
PERMANENT_CATEGORIES = frozenset(
    {ErrorCategory.INVALID_INPUT, ErrorCategory.NOT_FOUND, ErrorCategory.UNAUTHORIZED}
)

ANY_STATE: frozenset[State] = frozenset(State)


@dataclass(frozen=True)
class Edge:
    """One allowed move. ``sources`` is empty for the creating edges (∅ → state)."""

    number: str
    sources: frozenset[State]
    targets: frozenset[State]
    reasons: frozenset[Reason]
    actor: Actor
    guard: str
    #: The allowed (target, reason) pairs. Usually every target with every reason; edges 18
    #: and 20 pair each reason with one target (``lease_expired_cancelled`` only → cancelled).
    pairs: frozenset[tuple[State, Reason]] = frozenset()

    @property
    def annotation(self) -> bool:
        """X → X: a note on the timeline that does not change the state."""
        return self.number in ANNOTATION_EDGES

    @property
    def creates(self) -> bool:
        return not self.sources


def _e(
    number: str,
    sources: str,
    targets: str,
    reasons: str,
    actor: Actor,
    guard: str,
    paired: bool = False,
) -> Edge:
    """``paired``: the i-th reason leads to the i-th target (otherwise any to any)."""

    def states(text: str) -> list[State]:
        if text == "*":
            return list(State)
        return [State(s) for s in text.split()] if text else []

    tos, codes = states(targets), [Reason(r) for r in reasons.split()]
    if paired:
        assert len(tos) == len(codes), number
        pairs = frozenset(zip(tos, codes, strict=True))
    else:
        pairs = frozenset((t, r) for t in tos for r in codes)
    return Edge(
        number, frozenset(states(sources)), frozenset(tos), frozenset(codes), actor, guard, pairs
    )


#: The edges that annotate (X → X): the general one and debounce's.
ANNOTATION_EDGES = frozenset({"23", "23d"})

Q, L, AR, CR, W = "queued", "leased", "awaiting_receipt", "cancel_requested", "waiting"
S, C, D = "succeeded", "cancelled", "dead"

#: Every edge of the state machine (docs/state_machine.md is generated from it); tests walk it.
EDGES: tuple[Edge, ...] = (
    _e(
        "1", "", Q, "enqueued", Actor.CALLER, "idempotency key unique; run_at = db now unless given"
    ),
    _e("2", "", W, "enqueued", Actor.CALLER, "a parent created with children"),
    _e(
        "3",
        Q,
        L,
        "claimed",
        Actor.WORKER,
        "due, queue not paused, limits allow; sets owner, lease expiry, attempts += 1",
    ),
    _e("4", L, S, "completed", Actor.WORKER, "holder only"),
    _e(
        "5",
        L,
        Q,
        "retry_scheduled",
        Actor.WORKER,
        "transient or unclassified error, attempts < max, within budget; run_at by backoff",
    ),
    _e("5s", L, Q, "snoozed", Actor.WORKER, "handler raised Snooze; the attempt is not counted"),
    _e(
        "6",
        L,
        D,
        "permanent_error attempts_exhausted retry_budget_exhausted",
        Actor.WORKER,
        "a PermanentError or permanent category (or unclassified with retry_unclassified=False) "
        "→ permanent_error; else the last attempt → attempts_exhausted; else the next wait would "
        "pass max_elapsed → retry_budget_exhausted",
    ),
    _e("7", L, Q, "lease_expired", Actor.SWEEPER, "lease expired, kind reentrant, attempts < max"),
    _e(
        "8",
        L,
        D,
        "lease_expired_effect_uncertain attempts_exhausted",
        Actor.SWEEPER,
        "lease expired and kind not reentrant / last attempt",
    ),
    _e("9", L, AR, "submitted", Actor.WORKER, "stores receipt id and deadline; lease released"),
    _e("10", AR, S, "receipt_confirmed", Actor.CALLER, ""),
    _e(
        "11",
        AR,
        f"{Q} {D}",
        "receipt_failed",
        Actor.CALLER,
        "a transient category (or unclassified, unless retry_unclassified=False) with attempts "
        "left → queued after backoff; else dead",
    ),
    _e(
        "12",
        AR,
        D,
        "receipt_timeout",
        Actor.SWEEPER,
        "deadline passed and no reconcile hook, or the hook could not tell",
    ),
    _e("13", Q, C, "cancelled_before_start", Actor.CALLER, "no worker involved"),
    _e("14", L, CR, "cancel_requested", Actor.CALLER, ""),
    _e(
        "15",
        CR,
        C,
        "cancel_confirmed",
        Actor.WORKER,
        "at a side-effect boundary, or the handler failed after the request",
    ),
    _e(
        "16",
        CR,
        S,
        "cancel_too_late",
        Actor.WORKER,
        "an effect was already committed when the cancel was seen; handler finished",
    ),
    _e(
        "17",
        CR,
        AR,
        "cancel_too_late",
        Actor.WORKER,
        "the submission happened before the cancel was seen",
    ),
    _e(
        "18",
        CR,
        f"{C} {D}",
        "lease_expired_cancelled lease_expired_effect_uncertain",
        Actor.SWEEPER,
        "holder died after the request; reentrant → cancelled, else dead",
        paired=True,
    ),
    _e(
        "18f",
        CR,
        D,
        "failed_after_cancel",
        Actor.WORKER,
        "the handler failed after an effect was confirmed and a cancel was requested",
    ),
    _e(
        "19",
        D,
        Q,
        "replayed",
        Actor.OPERATOR,
        "operator and note required; replay_count += 1; attempts start again from 0",
    ),
    _e(
        "20",
        W,
        f"{S} {C} {D}",
        "children_succeeded children_cancelled child_dead",
        Actor.SYSTEM,
        "the workflow rule, in the child's transaction: any child dead → dead; all succeeded → "
        "succeeded; all finished, some cancelled → cancelled",
        paired=True,
    ),
    _e("21", D, W, "replayed", Actor.OPERATOR, "replaying a parent replays its dead children"),
    _e(
        "24",
        L,
        Q,
        "sleeping",
        Actor.WORKER,
        "handler called ctx.sleep; run_at = the wake time; lease released; attempt not counted",
    ),
    _e(
        "25",
        L,
        W,
        "waiting_for_event waiting_for_children",
        Actor.WORKER,
        "handler waits for an event not yet sent, or joins unfinished children it spawned; "
        "lease released; attempt not counted",
    ),
    _e(
        "26",
        W,
        Q,
        "event_received",
        Actor.CALLER,
        "send_event stores the event and wakes every task waiting for its key, one transaction",
    ),
    _e(
        "27",
        W,
        Q,
        "children_finished",
        Actor.SYSTEM,
        "in the last joined child's terminal transaction; the parent's handler decides",
    ),
    _e(
        "28",
        W,
        Q,
        "wait_timed_out",
        Actor.SWEEPER,
        "the wait's deadline passed; the resumed call raises WaitTimedOut",
    ),
    _e(
        "29",
        f"{Q} {W}",
        C,
        "cancelled_while_suspended",
        Actor.CALLER,
        "the handler is suspended (sleeping, waiting); no worker involved; children cancelled",
    ),
    _e(
        "30",
        CR,
        C,
        "cancelled_after_effects",
        Actor.WORKER,
        "the cancel is confirmed at a suspension after an effect was confirmed",
    ),
    _e(
        "22",
        "*",
        "*",
        "manual_fix",
        Actor.OPERATOR,
        "operator and note required; leaving leased/awaiting_receipt needs effects_checked",
    ),
    _e(
        "23",
        "*",
        "*",
        "correction cancel_refused_submitted receipt_requeried dismissed",
        Actor.ANY,
        "annotation: the state does not change",
    ),
    _e(
        "23d",
        Q,
        Q,
        "debounced",
        Actor.CALLER,
        "annotation: an enqueue with the debounce key of this queued, unclaimed task replaced "
        "its payload and moved its run time (never past the first enqueue + debounce_max)",
    ),
    _e(
        "13e",
        Q,
        C,
        "expired",
        Actor.SWEEPER,
        "expires_at passed while queued: never claimed (the claim skips it), cancelled",
    ),
)

#: Which pairs each reason may join, for the pure lookups below.
_REASON_TARGETS: dict[tuple[Reason, State | None, State], Edge] = {}
for _edge in EDGES:
    for _target, _reason in _edge.pairs:
        for _source in _edge.sources or frozenset({None}):  # type: ignore[arg-type]
            if _edge.annotation and _source != _target:
                continue
            _REASON_TARGETS.setdefault((_reason, _source, _target), _edge)


def find_edge(source: State | None, target: State, reason: Reason) -> Edge | None:
    """The edge that allows ``source → target`` for ``reason``, or ``None``."""
    return _REASON_TARGETS.get((reason, source, target))


def is_allowed(source: State | None, target: State, reason: Reason) -> bool:
    return find_edge(source, target, reason) is not None


#: Reason codes that annotate the timeline without moving the state.
ANNOTATIONS = frozenset(
    {Reason.CORRECTION, Reason.CANCEL_REFUSED_SUBMITTED, Reason.RECEIPT_REQUERIED, Reason.DISMISSED}
    | {Reason.DEBOUNCED}
)
#: Reason codes that are not transitions of a task (they are recorded on cron windows).
WINDOW_REASONS = frozenset({Reason.WINDOW_SKIPPED_CATCH_UP_BOUND, Reason.WINDOW_SKIPPED_PAUSED})
