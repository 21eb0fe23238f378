"""Documentation generated from the edge table, so the diagram and the code table cannot drift.

``python -m jobtrail.docs [PATH]`` rewrites the generated blocks of a README (default
``README.md``) in place; ``--state-machine docs/state_machine.md`` writes the state-machine page;
``--check`` changes nothing and exits 1 naming every stale block (CI runs it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from .explain import sentence
from .machine import ANY_STATE, EDGES, TERMINAL, WINDOW_REASONS, Actor, Edge, Reason, State

_ORDER_R = {r: i for i, r in enumerate(Reason)}
_ORDER_S = {s: i for i, s in enumerate(State)}

#: Edges whose table row is a cross product (several targets, several reasons) although each
#: reason leads to one target (SPEC §4 rows 18 and 20). The diagram draws the real pairs; the
#: pairing is used only while it covers the edge exactly, else the cross product is drawn.
#: What causes the cron-window codes, which are not task edges (SPEC §12).
_WINDOW_GUARDS = {
    Reason.WINDOW_SKIPPED_CATCH_UP_BOUND: "a missed window beyond the catch-up bound",
    Reason.WINDOW_SKIPPED_PAUSED: "the window came while its queue was paused (on_paused=skip)",
}


def _reasons(reasons: Iterable[Reason]) -> list[Reason]:
    return sorted(reasons, key=_ORDER_R.__getitem__)


def _states(states: Iterable[State]) -> list[State]:
    return sorted(states, key=_ORDER_S.__getitem__)


def _is_free(edge: Edge) -> bool:
    """Edges 22 (manual_fix, any → any) and 23 (annotations) are notes, not 64 arrows."""
    return edge.annotation or (edge.sources == ANY_STATE and edge.targets == ANY_STATE)


def _pairs(edge: Edge) -> list[tuple[State, Reason]]:
    """The (target, reason) pairs an edge draws."""
    return sorted(edge.pairs, key=lambda p: (list(State).index(p[0]), p[1].value))


def state_diagram() -> str:
    """A fenced Mermaid ``stateDiagram-v2`` block drawing every edge of ``machine.EDGES``."""
    arrows: dict[tuple[str, str], list[str]] = {}
    notes: list[str] = []
    for edge in EDGES:
        codes = " / ".join(_reasons(edge.reasons))
        if edge.annotation:
            notes.append(
                f"    note left of {State.QUEUED} : {codes} (edge {edge.number}) annotate the "
                "timeline of any state without changing it"
            )
            continue
        if _is_free(edge):
            notes.append(
                f"    note right of {State.DEAD} : {codes} (edge {edge.number}) may move any "
                f"state to any state, by an {edge.actor} with a note, audited"
            )
            continue
        sources: list[str] = [str(s) for s in _states(edge.sources)] or ["[*]"]
        for source in sources:
            for target, reason in _pairs(edge):
                labels = arrows.setdefault((source, str(target)), [])
                if reason not in labels:
                    labels.append(reason)
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += [f"    {s} --> {t}: {' / '.join(labels)}" for (s, t), labels in arrows.items()]
    lines += [f"    {state} --> [*]" for state in _states(TERMINAL)]
    lines += notes
    lines.append("```")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _state_cell(edge: Edge) -> str:
    def names(states: frozenset[State]) -> str:
        return " / ".join(f"`{s}`" for s in _states(states))

    if edge.annotation:
        return "X → X (no change)"
    source = "∅" if edge.creates else "any" if edge.sources == ANY_STATE else None
    target = "any" if edge.targets == ANY_STATE else names(edge.targets)
    return f"{source or names(edge.sources)} → {target}"


def reason_table() -> str:
    """A Markdown table: one row per edge, then one per cron-window code (no task edge)."""
    rows = [
        "| # | from → to | reason code(s) | actor | guard / effect | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for edge in EDGES:
        reasons = _reasons(edge.reasons)
        codes = ", ".join(f"`{r}`" for r in reasons)
        if len(reasons) == 1:
            meaning = sentence(reasons[0])
        else:
            meaning = "<br>".join(f"`{r}`: {sentence(r)}" for r in reasons)
        guard = edge.guard or "—"
        cells = [edge.number, _state_cell(edge), codes, str(edge.actor), guard, meaning]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    for reason in _reasons(WINDOW_REASONS):
        guard = _WINDOW_GUARDS.get(reason, "recorded on the cron window")
        cells = [
            "—",
            "cron window (no task edge)",
            f"`{reason}`",
            str(Actor.SYSTEM),
            guard,
            sentence(reason),
        ]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


_BLOCKS: dict[str, Callable[[], str]] = {
    "state-diagram": state_diagram,
    "reason-codes": reason_table,
}


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"


def _span(text: str, name: str) -> tuple[int, int]:
    """Start and end offsets of the content between the markers of block ``name``."""
    begin, end = _markers(name)
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"expected exactly one {begin!r} and one {end!r} marker")
    start = text.index(begin) + len(begin)
    stop = text.index(end)
    if stop < start:
        raise ValueError(f"{end!r} comes before {begin!r}")
    return start, stop


def update_readme(text: str) -> str:
    """``text`` with every generated block replaced; everything outside the markers is kept.

    Raises ``ValueError`` when a marker is missing, repeated or out of order.
    """
    for name in _BLOCKS:
        _span(text, name)  # check every marker before changing anything
    for name, make in _BLOCKS.items():
        start, stop = _span(text, name)
        text = f"{text[:start]}\n{make()}\n{text[stop:]}"
    return text


def stale_blocks(text: str) -> list[str]:
    """Names of the generated blocks in ``text`` that differ from what the table generates."""
    stale = []
    for name, make in _BLOCKS.items():
        start, stop = _span(text, name)
        if text[start:stop] != f"\n{make()}\n":
            stale.append(name)
    return stale


def state_machine_doc() -> str:
    """The content of ``docs/state_machine.md``: an introduction, the diagram, the table."""
    return "\n".join(
        [
            "# The jobtrail state machine",
            "",
            "<!-- Generated by `python -m jobtrail.docs --state-machine docs/state_machine.md`"
            " from `jobtrail.machine.EDGES`; do not edit by hand. -->",
            "",
            "A task is a row with exactly one state. Every change of state is one of the edges "
            "below: a conditional update of the row plus one appended transition carrying a "
            "stable reason code, in one transaction. Terminal states (`succeeded`, `cancelled`, "
            "`dead`) are left only by the audited edges `replayed` and `manual_fix`. The "
            "sentences are what `jobtrail explain` prints in English; the codes never change "
            "meaning.",
            "",
            "## States and edges",
            "",
            state_diagram(),
            "",
            "## Reason codes",
            "",
            reason_table(),
            "",
        ]
    )


def write_state_machine_doc(path: str | os.PathLike[str]) -> bool:
    """Write the state-machine page to ``path``; ``True`` when the file changed."""
    target = Path(path)
    content = state_machine_doc()
    if target.exists() and target.read_text(encoding="utf-8") == content:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobtrail.docs",
        description="Regenerate the state diagram and reason-code table from the edge table.",
    )
    parser.add_argument("path", nargs="?", help="README to update (default README.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("--state-machine", metavar="PATH", help="also write this page")
    args = parser.parse_args(argv)
    readme = args.path or (None if args.state_machine else "README.md")
    failed = False
    if readme is not None:
        file = Path(readme)
        try:
            text = file.read_text(encoding="utf-8")
            stale = stale_blocks(text)
        except (OSError, ValueError) as exc:
            print(f"{readme}: {exc}", file=sys.stderr)
            return 2
        if args.check:
            for name in stale:
                print(f"{readme}: generated block {name!r} is stale; run python -m jobtrail.docs")
            failed = bool(stale)
        elif stale:
            file.write_text(update_readme(text), encoding="utf-8")
            print(f"{readme}: updated {', '.join(stale)}")
    if args.state_machine:
        page = Path(args.state_machine)
        if args.check:
            current = page.read_text(encoding="utf-8") if page.exists() else None
            if current != state_machine_doc():
                print(f"{page}: stale; run python -m jobtrail.docs --state-machine {page}")
                failed = True
        elif write_state_machine_doc(page):
            print(f"{page}: updated")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
