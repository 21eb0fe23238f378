"""One picture of a task's life: its phases (queued, attempts, retry waits, sleeps, waits,
receipt wait) on a time axis, as a server-rendered SVG and as a list of the same phases.

The phases come from the transition log alone: each transition that changes the state starts
a phase that lasts until the next one; what the phase *is* follows from the state it entered
and the machine's reason code that moved it there (``Reason``: into ``queued`` a retry's
back-off, a durable handler's sleep, or a wait for a worker; into ``waiting`` a wait for an
event or for children). ``tests/unit/test_dashboard_life.py`` checks every (state, reason)
pair of the machine is placed on purpose. A transition that keeps the state (a note, a
correction, a dismissal, a debounce) does not start a phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape

from ...model import i18n
from ...model.machine import TERMINAL, Reason, State
from ...model.models import Transition

#: reasons that put a task back in the queue to wait out a back-off before its next attempt
RETRY_REASONS = frozenset(
    {
        Reason.RETRY_SCHEDULED,
        Reason.LEASE_EXPIRED,
        Reason.SNOOZED,
        Reason.RECEIPT_FAILED,
    }
)
#: reasons that put a task back in the queue ready for a worker (a wake-up included: the
#: handler resumes when claimed)
QUEUE_REASONS = frozenset(
    {
        Reason.ENQUEUED,
        Reason.REPLAYED,
        Reason.MANUAL_FIX,
        Reason.EVENT_RECEIVED,
        Reason.CHILDREN_FINISHED,
        Reason.WAIT_TIMED_OUT,
    }
)
SLEEP_REASONS = frozenset({Reason.SLEEPING})
#: into ``waiting``: a durable handler's wait, or a workflow parent (created or replayed with
#: its children) waiting for them
WAIT_REASONS = {
    Reason.WAITING_FOR_EVENT: "wait_event",
    Reason.WAITING_FOR_CHILDREN: "wait_children",
    Reason.ENQUEUED: "wait_children",
    Reason.REPLAYED: "wait_children",
}
#: the lanes, top to bottom, each a kind of phase
LANES = ("queue", "run", "retry", "sleep", "wait", "receipt")
LANE_OF = {
    "queue": "queue",
    "run": "run",
    "cancelling": "run",
    "retry": "retry",
    "sleep": "sleep",
    "wait_event": "wait",
    "wait_children": "wait",
    "wait": "wait",
    "receipt": "receipt",
}

#: each kind of phase and each lane by its catalog key (``model/i18n.py``)
PHASE_KEYS = {
    "queue": "life.queue",
    "retry": "life.retry",
    "sleep": "life.sleep",
    "wait_event": "life.wait_event",
    "wait_children": "life.wait_children",
    "wait": "life.wait",
    "receipt": "life.receipt",
    "cancelling": "life.cancelling",
}
LANE_KEYS = {
    "queue": "life.lane_queue",
    "run": "life.lane_run",
    "retry": "life.lane_retry",
    "sleep": "life.lane_sleep",
    "wait": "life.lane_wait",
    "receipt": "life.lane_receipt",
}

WIDTH, LABEL_W, LANE_H, AXIS_H, PAD = 960, 130, 26, 34, 8


@dataclass
class Phase:
    kind: str  # a key of LANE_OF
    start: datetime
    end: datetime
    reason: str  # the reason that started it
    end_reason: str | None  # the reason that ended it (None: it goes on)
    attempt: int

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())


def _kind(t: Transition) -> str | None:
    """What the phase ``t`` starts is, or ``None`` when ``t`` ends the task's life."""
    reason = _reason(t.reason)
    if t.to_state in TERMINAL:
        return None
    if t.to_state is State.LEASED:
        return "run"
    if t.to_state is State.CANCEL_REQUESTED:
        return "cancelling"
    if t.to_state is State.AWAITING_RECEIPT:
        return "receipt"
    if t.to_state is State.WAITING:
        return WAIT_REASONS.get(reason, "wait") if reason is not None else "wait"
    if reason in SLEEP_REASONS:
        return "sleep"
    if reason in RETRY_REASONS:
        return "retry"
    return "queue"


def _reason(value: object) -> Reason | None:
    """The machine's reason for a logged code; ``None`` for a code it does not know (a row
    written by a newer release), drawn by the state it entered."""
    try:
        return Reason(str(value))
    except ValueError:
        return None


def phases(transitions: list[Transition], now: datetime) -> list[Phase]:
    """The phases of a life from its transitions (in ``seq`` order); the last one of a task
    that has not finished lasts until ``now``."""
    moves = [t for t in transitions if t.from_state is None or t.from_state != t.to_state]
    found: list[Phase] = []
    for i, t in enumerate(moves):
        kind = _kind(t)
        if kind is None:
            continue
        following = moves[i + 1] if i + 1 < len(moves) else None
        found.append(
            Phase(
                kind=kind,
                start=t.at,
                end=following.at if following else max(now, t.at),
                reason=str(t.reason),
                end_reason=str(following.reason) if following else None,
                attempt=t.attempt,
            )
        )
    return found


def ending(transitions: list[Transition]) -> Transition | None:
    """The transition that ended the life (into ``succeeded``, ``cancelled`` or ``dead``), or
    ``None`` while it goes on."""
    moves = [t for t in transitions if t.from_state is None or t.from_state != t.to_state]
    last = moves[-1] if moves else None
    return last if last is not None and last.to_state in TERMINAL else None


def describe_end(end: Transition, first: Phase | None, lang: str) -> str:
    """The accessible list's last line: how the life ended, and when."""
    took = (end.at - first.start).total_seconds() if first else 0.0
    return i18n.t("life.end", lang, state=end.to_state.value, reason=end.reason, at=_seconds(took))


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    if value < 172800:
        return f"{value / 3600:.1f} h"
    return f"{value / 86400:.1f} d"


def phase_name(p: Phase, lang: str) -> str:
    if p.kind == "run":
        return i18n.t("life.run", lang, n=p.attempt)
    return i18n.t(PHASE_KEYS[p.kind], lang)


def describe(p: Phase, lang: str) -> str:
    """One line of the accessible list: the phase, how long, what started and ended it."""
    end = p.end_reason or i18n.t("life.goes_on", lang)
    return i18n.t(
        "life.item", lang, phase=phase_name(p, lang), took=_seconds(p.seconds),
        start=p.reason, end=end,
    )  # fmt: skip


def svg(found: list[Phase], lang: str, end: Transition | None = None) -> str:
    """The picture: one lane per kind of phase, a bar per phase with its reason written on it
    (where it fits; always in its tooltip), and a time axis labelled in seconds from the
    enqueue. Decorative to a screen reader, which reads the list beside it instead."""
    if not found:
        return ""
    origin = found[0].start
    total = max((p.end - origin).total_seconds() for p in found) or 1.0
    lanes = [lane for lane in LANES if any(LANE_OF[p.kind] == lane for p in found)]
    plot = WIDTH - LABEL_W - PAD
    height = PAD + len(lanes) * LANE_H + AXIS_H
    out = [
        f'<svg class="life" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'preserveAspectRatio="xMinYMin meet" aria-hidden="true" focusable="false">'
    ]
    for row, lane in enumerate(lanes):
        y = PAD + row * LANE_H
        out.append(
            f'<text x="4" y="{y + LANE_H * 0.65:.1f}" class="lane">'
            f"{escape(i18n.t(LANE_KEYS[lane], lang))}</text>"
            f'<line x1="{LABEL_W}" x2="{WIDTH - PAD}" y1="{y + LANE_H - 1}" '
            f'y2="{y + LANE_H - 1}" class="grid"/>'
        )
    for p in found:
        row = lanes.index(LANE_OF[p.kind])
        x = LABEL_W + (p.start - origin).total_seconds() / total * plot
        w = max(2.0, p.seconds / total * plot)
        y = PAD + row * LANE_H + 3
        tip = escape(describe(p, lang))
        out.append(
            f'<g class="phase p-{p.kind}"><rect x="{x:.1f}" y="{y}" width="{w:.1f}" '
            f'height="{LANE_H - 8}" rx="2"><title>{tip}</title></rect>'
        )
        if w >= 7.5 * len(p.reason) + 6:
            out.append(
                f'<text x="{x + 3:.1f}" y="{y + LANE_H * 0.5:.1f}" class="reason">'
                f"{escape(p.reason)}</text>"
            )
        out.append("</g>")
    base = PAD + len(lanes) * LANE_H
    if end is not None:  # the end of the life: a mark with its state
        x = LABEL_W + (end.at - origin).total_seconds() / total * plot
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD - 4}" y2="{base}" '
            f'class="end e-{end.to_state.value}">'
            f"<title>{escape(describe_end(end, found[0], lang))}</title></line>"
        )
    out.append(f'<line x1="{LABEL_W}" x2="{WIDTH - PAD}" y1="{base}" y2="{base}" class="axis"/>')
    for k in range(6):
        x = LABEL_W + k / 5 * plot
        anchor = "end" if k == 5 else "start" if k == 0 else "middle"
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 5}" class="axis"/>'
            f'<text x="{x:.1f}" y="{base + 18}" text-anchor="{anchor}" class="tick">'
            f"+{escape(_seconds(total * k / 5))}</text>"
        )
    out.append(
        f'<text x="{LABEL_W + plot / 2:.1f}" y="{base + 31}" text-anchor="middle" class="tick">'
        f"{escape(i18n.t('life.axis', lang))}</text></svg>"
    )
    return "".join(out)
