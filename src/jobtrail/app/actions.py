"""The parts of ``App`` for the actions of operators and callers: two-phase cancel, the
audited ``force`` (``manual_fix``), and the timeline's annotations (``annotate``, ``dismiss``),
each through the one transition path. Held by ``App``."""

from __future__ import annotations

from ..core import transition
from ..core.decide import decide_cancel
from ..core.suspension import cancel_suspended, suspended
from ..model import validate
from ..model.errors import IllegalTransition
from ..model.machine import Reason, State
from ..model.models import CancelResult, Task, task_from_row
from ..store.base import Move, Row, Tx
from .core import Core, Part, _require_text
from .effects import Effects
from .reads import Reads


class Actions(Part):
    """Cancel, force, annotate, dismiss. Given ``Reads`` (``get``: what a waiting parent's
    cancel answers) and ``Effects`` (``children``: a waiting parent's cancel reaches them)."""

    def __init__(self, core: Core, reads: Reads, effects: Effects) -> None:
        super().__init__(core)
        self._reads = reads
        self._effects = effects

    # -- operator and caller actions ------------------------------------------------------------
    def cancel(self, task_id: str | int, *, by: str, note: str | None = None) -> CancelResult:
        """Two-phase cancel: ``queued`` → ``cancelled``; ``leased`` → ``cancel_requested``
        (the worker confirms at a boundary); repeats are idempotent and append nothing."""
        _require_text(by, "by")
        if note is not None:
            validate.filter_text(note, "note", max_length=validate.MAX_NOTE)
        while True:
            with self._driver.transaction() as tx:
                row = self._core._row(tx, task_id)
                state = State(row["state"])
                if suspended(row):  # a durable handler asleep or waiting: no worker involved
                    if cancel_suspended(self._driver, tx, row, by=by, note=note):
                        return CancelResult(
                            str(row["id"]),
                            "cancelled",
                            State.CANCELLED,
                            Reason.CANCELLED_WHILE_SUSPENDED,
                        )
                    continue
                verdict = decide_cancel(state)
                if verdict.outcome == "children":
                    break
                if verdict.outcome == "illegal":
                    raise IllegalTransition(str(row["id"]), state, "cancel")
                if verdict.decision is None:
                    return CancelResult(str(row["id"]), verdict.outcome, state, row["last_reason"])
                target, reason, outcome = (
                    verdict.decision.to_state,
                    verdict.decision.reason,
                    verdict.outcome,
                )
                moved = transition.apply(
                    self._driver,
                    tx,
                    transition.move_for(
                        verdict.decision, task_id=row["id"], from_state=state, actor=by, note=note
                    ),
                )
                if moved is not None:
                    return CancelResult(
                        str(row["id"]),
                        outcome,
                        target,
                        reason if target != state else row["last_reason"],
                    )
            # somebody moved the task first: read again and decide again
        return self._cancel_children(row["id"], by, note)

    def _cancel_children(self, parent_id: int, by: str, note: str | None) -> CancelResult:
        """Cancelling a ``waiting`` parent cancels each unfinished child by the normal rules;
        ``cancelled`` once every child is terminal, else ``cancel_requested``."""
        for child in self._effects.children(parent_id):
            if not child.terminal:
                self.cancel(child.id, by=by, note=note)
        parent = self._reads.get(parent_id)
        done = all(c.terminal for c in self._effects.children(parent_id))
        return CancelResult(
            parent.id, "cancelled" if done else "cancel_requested", parent.state, parent.last_reason
        )

    def force(
        self,
        task_id: str | int,
        to_state: State | str,
        *,
        by: str,
        note: str,
        effects_checked: bool = False,
    ) -> Task:
        """``manual_fix`` (edge 22): the only way to force a state, audited. Leaving ``leased``
        or ``awaiting_receipt`` needs ``effects_checked=True`` (a person looked outside)."""
        _require_text(by, "by")
        _require_text(note, "note")
        try:
            target = State(to_state)
        except ValueError:
            raise ValueError(f"unknown state {to_state!r}") from None
        if target in (State.LEASED, State.CANCEL_REQUESTED, State.AWAITING_RECEIPT):
            raise ValueError(
                f"cannot force a task into {target.value}: only a worker takes a "
                "lease or submits; force it to queued to run it again"
            )
        with self._driver.transaction() as tx:
            row = self._core._row(tx, task_id)
            source = State(row["state"])
            if (
                source in (State.LEASED, State.CANCEL_REQUESTED, State.AWAITING_RECEIPT)
                and not effects_checked
            ):
                raise ValueError(
                    f"task {row['id']} is {source.value}: forcing it out needs "
                    "effects_checked=True (--effects-checked) after checking the outside world"
                )
            moved = transition.apply(
                self._driver,
                tx,
                Move(
                    task_id=row["id"],
                    from_state=source,
                    to_state=target,
                    reason=Reason.MANUAL_FIX,
                    actor=by,
                    note=note,
                    run_in=0.0 if target is State.QUEUED else None,
                    data={"effects_checked": effects_checked},
                ),
            )
            if moved is None:  # pragma: no cover - writes are serialised in this transaction
                raise IllegalTransition(str(row["id"]), source, f"force to {target.value}")
            if target is State.QUEUED:
                self._driver.notify_queued(tx, row["queue"])
            return task_from_row(self._core._row(tx, task_id))

    def annotate(
        self, task_id: str | int, *, by: str, note: str, corrects: int | None = None
    ) -> None:
        """Append a ``correction`` to the timeline (the log is never edited in place)."""
        _require_text(by, "by")
        _require_text(note, "note")
        with self._driver.transaction() as tx:
            row = self._core._row(tx, task_id)
            if corrects is not None and not (
                isinstance(corrects, int) and 1 <= corrects <= row["seq"]
            ):
                raise ValueError(
                    f"corrects must name a transition seq of task {row['id']} (1..{row['seq']})"
                )
            self._annotate(tx, row, Reason.CORRECTION, by, note, corrects)

    def dismiss(self, task_id: str | int, *, by: str, note: str) -> None:
        """Close a ``dead`` task that will not be replayed: it stays dead with its history and
        leaves the needs-attention counts (``dismissed``)."""
        _require_text(by, "by")
        _require_text(note, "note")
        with self._driver.transaction() as tx:
            row = self._core._row(tx, task_id)
            if row["state"] != State.DEAD:
                raise IllegalTransition(str(row["id"]), row["state"], "dismiss (only dead tasks)")
            if row["dismissed_at"] is not None:  # dismissing twice records nothing
                return
            self._annotate(tx, row, Reason.DISMISSED, by, note, None)

    def _annotate(
        self, tx: Tx, row: Row, reason: Reason, by: str, note: str | None, corrects: int | None
    ) -> None:
        state = State(row["state"])
        moved = transition.apply(
            self._driver,
            tx,
            Move(
                task_id=row["id"],
                from_state=state,
                to_state=state,
                reason=reason,
                actor=by,
                note=note,
                corrects=corrects,
            ),
        )
        if moved is None:  # pragma: no cover - writes are serialised in this transaction
            raise IllegalTransition(str(row["id"]), state, reason.value)
