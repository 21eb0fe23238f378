"""Documentation generated from the code, so the pages cannot drift from it. A developer tool,
run from the repository's root; not shipped in the wheel.

``python -m tools.docs [PATH]`` rewrites the generated blocks that a Markdown file (default
``README.md``) contains — the state diagram and the reason-code table, each between
``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` — in place;
``--state-machine docs/state_machine.md`` writes the state-machine page (diagram and table,
from ``machine.EDGES``); ``--cli docs/cli.md`` writes the CLI reference (every verb's
``--help``, from the click commands). ``--check`` changes nothing and exits 1 naming every stale
block or page (CI runs it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from jobtrail.core.explain import sentence
from jobtrail.model.machine import (
    ANY_STATE,
    EDGES,
    TERMINAL,
    WINDOW_REASONS,
    Actor,
    Edge,
    Reason,
    State,
)

_ORDER_R = {r: i for i, r in enumerate(Reason)}
_ORDER_S = {s: i for i, s in enumerate(State)}

#: What causes the cron-window codes, which are not task edges.
_WINDOW_GUARDS = {
    Reason.WINDOW_SKIPPED_CATCH_UP_BOUND: "a missed window beyond the catch-up bound",
    Reason.WINDOW_SKIPPED_PAUSED: "the window came while its queue was paused (on_paused=skip)",
}


def _guard(edge: Edge) -> str:
    return edge.guard or "—"


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
    annotations: list[str] = []
    for edge in EDGES:
        codes = " / ".join(_reasons(edge.reasons))
        if edge.annotation:
            where = (
                "any state"
                if edge.sources == ANY_STATE
                else " / ".join(str(s) for s in _states(edge.sources))
            )
            annotations.append(f"{codes} (edge {edge.number}, {where})")
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
    if annotations:
        lines.append(
            f"    note left of {State.QUEUED} : annotations (state unchanged): "
            + "; ".join(annotations)
        )
    lines.append("```")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _state_cell(edge: Edge) -> str:
    def names(states: frozenset[State]) -> str:
        return " / ".join(f"`{s}`" for s in _states(states))

    if edge.annotation:
        if edge.sources != ANY_STATE:
            return " / ".join(f"`{s}` → `{s}`" for s in _states(edge.sources)) + " (no change)"
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
        guard = _guard(edge)
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


def _present(text: str) -> list[str]:
    """The generated blocks ``text`` has a marker of; ``ValueError`` when it has none."""
    names = [name for name in _BLOCKS if any(m in text for m in _markers(name))]
    if not names:
        begins = ", ".join(repr(_markers(name)[0]) for name in _BLOCKS)
        raise ValueError(f"no generated block: expected one of the markers {begins}")
    return names


def update_readme(text: str) -> str:
    """``text`` with every generated block it contains replaced; everything outside the
    markers is kept.

    Raises ``ValueError`` when it has no block, or a marker is missing, repeated or out of order.
    """
    names = _present(text)
    for name in names:
        _span(text, name)  # check every marker before changing anything
    for name in names:
        start, stop = _span(text, name)
        text = f"{text[:start]}\n{_BLOCKS[name]()}\n{text[stop:]}"
    return text


def stale_blocks(text: str) -> list[str]:
    """Names of the generated blocks in ``text`` that differ from what the code generates."""
    stale = []
    for name in _present(text):
        start, stop = _span(text, name)
        if text[start:stop] != f"\n{_BLOCKS[name]()}\n":
            stale.append(name)
    return stale


def state_machine_doc() -> str:
    """The content of ``docs/state_machine.md``: an introduction, the diagram, the table."""
    return "\n".join(
        [
            "# The jobtrail state machine",
            "",
            "<!-- Generated by `python -m tools.docs --state-machine docs/state_machine.md`"
            " from `jobtrail.model.machine.EDGES`; do not edit by hand. -->",
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


def _walk(parent: Any) -> Iterator[Any]:
    """A context for every command under ``parent``'s group, depth first, by name."""
    import click

    for name in sorted(parent.command.commands):
        context = click.Context(parent.command.commands[name], info_name=name, parent=parent)
        yield context
        if isinstance(context.command, click.Group):
            yield from _walk(context)


def cli_reference() -> str:
    """The content of ``docs/cli.md``: ``jobtrail --help`` and every verb's ``--help``, as
    click prints them at 100 columns."""
    import click

    from jobtrail.cli import EXIT_CODES, cli

    root = click.Context(
        cli, info_name="jobtrail", terminal_width=100, max_content_width=100, **cli.context_settings
    )
    lines = [
        "# The jobtrail command line",
        "",
        "<!-- Generated by `python -m tools.docs --cli docs/cli.md` from the click commands;"
        " do not edit by hand. -->",
        "",
        "Every verb takes `--db URL` (else the `--app`'s URL, else `JOBTRAIL_DATABASE_URL`, else "
        "`sqlite:///jobtrail.db`), `--app MODULE:ATTR` (else `JOBTRAIL_APP`) and `--json`. "
        "Errors print one line on stderr, never a traceback.",
        "",
        "## Exit codes",
        "",
        "One code per kind of error, the same for every verb:",
        "",
        "| code | meaning |",
        "|---|---|",
        *(f"| {code} | {meaning} |" for code, meaning in EXIT_CODES),
        "",
        "## jobtrail",
        "",
        "```text",
        root.get_help(),
        "```",
    ]
    for context in _walk(root):
        lines += ["", f"## {context.command_path}", "", "```text", context.get_help(), "```"]
    return "\n".join(lines) + "\n"


def _write_page(path: str | os.PathLike[str], content: str) -> bool:
    target = Path(path)
    if target.exists() and target.read_text(encoding="utf-8") == content:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return True


def write_state_machine_doc(path: str | os.PathLike[str]) -> bool:
    """Write the state-machine page to ``path``; ``True`` when the file changed."""
    return _write_page(path, state_machine_doc())


def write_cli_reference(path: str | os.PathLike[str]) -> bool:
    """Write the CLI reference to ``path``; ``True`` when the file changed."""
    return _write_page(path, cli_reference())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.docs",
        description="Regenerate the documentation generated from the code.",
    )
    parser.add_argument(
        "path", nargs="?", help="Markdown file whose generated blocks to update (default README.md)"
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("--state-machine", metavar="PATH", help="also write this page")
    parser.add_argument("--cli", metavar="PATH", help="also write the CLI reference page")
    args = parser.parse_args(argv)
    pages: list[tuple[str, str, Callable[[], str]]] = []
    if args.state_machine:
        pages.append((args.state_machine, "--state-machine", state_machine_doc))
    if args.cli:
        pages.append((args.cli, "--cli", cli_reference))
    readme = args.path or (None if pages else "README.md")
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
                print(f"{readme}: generated block {name!r} is stale; run python -m tools.docs")
            failed = bool(stale)
        elif stale:
            file.write_text(update_readme(text), encoding="utf-8")
            print(f"{readme}: updated {', '.join(stale)}")
    for name, option, make in pages:
        page = Path(name)
        content = make()
        if args.check:
            current = page.read_text(encoding="utf-8") if page.exists() else None
            if current != content:
                print(f"{page}: stale; run python -m tools.docs {option} {page}")
                failed = True
        elif _write_page(page, content):
            print(f"{page}: updated")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
