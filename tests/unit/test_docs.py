"""The generated state diagram, reason-code table and README blocks follow the edge table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobtrail.core.explain import sentence
from jobtrail.model.machine import EDGES, TERMINAL, WINDOW_REASONS, Reason, State
from tools import docs

BLOCKS = ("state-diagram", "reason-codes")


def marked(name: str, body: str) -> str:
    return f"<!-- BEGIN GENERATED: {name} -->{body}<!-- END GENERATED: {name} -->"


README = (
    "# jobtrail\n\nIntro stays.\n\n"
    + marked("state-diagram", "\nold diagram\n")
    + "\n\nBetween stays.\n\n"
    + marked("reason-codes", "\nold table\n")
    + "\n\nOutro stays.\n"
)


# --- diagram -----------------------------------------------------------------------------------


def test_diagram_is_a_fenced_mermaid_state_diagram() -> None:
    lines = docs.state_diagram().splitlines()
    assert lines[0] == "```mermaid"
    assert lines[1] == "stateDiagram-v2"
    assert lines[-1] == "```"


def test_diagram_mentions_every_state_and_every_reason_of_every_edge() -> None:
    diagram = docs.state_diagram()
    for state in State:
        assert re.search(rf"\b{state.value}\b", diagram), state
    for edge in EDGES:
        for reason in edge.reasons:
            assert reason.value in diagram, (edge.number, reason)


def test_diagram_arrows_are_edges_of_the_table() -> None:
    arrows = re.findall(r"^\s+(\S+) --> (\S+?)(?:: (.+))?$", docs.state_diagram(), re.M)
    assert arrows
    drawn: set[tuple[str, str, str]] = set()
    for source, target, label in arrows:
        if target == "[*]":
            assert State(source) in TERMINAL
            continue
        for reason in label.split(" / "):
            src = None if source == "[*]" else State(source)
            edge = next(
                (
                    e
                    for e in EDGES
                    if reason in e.reasons
                    and State(target) in e.targets
                    and (src in e.sources if src else e.creates)
                ),
                None,
            )
            assert edge is not None, (source, target, reason)
            drawn.add((source, target, reason))
    # Every non-free edge is drawn at least once per source.
    for edge in EDGES:
        if edge.number == "22" or edge.annotation:
            continue
        for source in [s.value for s in edge.sources] or ["[*]"]:
            assert any(d[0] == source and d[2] in edge.reasons for d in drawn), edge.number


def test_diagram_creating_and_terminal_arrows() -> None:
    diagram = docs.state_diagram()
    assert "    [*] --> queued: enqueued" in diagram
    assert "    [*] --> waiting: enqueued" in diagram
    for state in TERMINAL:
        assert f"    {state.value} --> [*]" in diagram


def test_free_edges_are_notes_not_64_arrows() -> None:
    diagram = docs.state_diagram()
    arrows = [line for line in diagram.splitlines() if "-->" in line]
    assert not any("manual_fix" in line or "correction" in line for line in arrows)
    notes = [line for line in diagram.splitlines() if line.strip().startswith("note ")]
    assert any("manual_fix" in note and "any state" in note for note in notes)
    assert any("dismissed" in note and "correction" in note for note in notes)
    assert len(arrows) < 30


def test_diagram_pairs_aggregation_and_sweeper_reasons_with_their_targets() -> None:
    diagram = docs.state_diagram()
    assert "    waiting --> succeeded: children_succeeded\n" in diagram
    assert "    waiting --> cancelled: children_cancelled / cancelled_while_suspended\n" in (
        diagram
    )
    assert "    waiting --> dead: child_dead\n" in diagram
    assert (
        "cancel_requested --> cancelled: cancel_confirmed / lease_expired_cancelled"
        " / cancelled_after_effects\n"
    ) in diagram
    assert "    waiting --> queued: event_received / children_finished / wait_timed_out\n" in (
        diagram
    )


def test_diagram_is_deterministic() -> None:
    assert docs.state_diagram() == docs.state_diagram()


# --- reason table ------------------------------------------------------------------------------


def test_reason_table_has_a_row_per_edge_and_per_window_code() -> None:
    table = docs.reason_table()
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]  # minus the header
    assert len(rows) == len(EDGES) + len(WINDOW_REASONS)
    for edge, row in zip(EDGES, rows, strict=False):
        assert row.startswith(f"| {edge.number} | ")
        assert f"| {edge.actor.value} |" in row
        for reason in edge.reasons:
            assert f"`{reason.value}`" in row
            assert sentence(reason) in row


def test_reason_table_mentions_every_reason_code() -> None:
    table = docs.reason_table()
    for reason in Reason:
        rows = [line for line in table.splitlines() if f"`{reason.value}`" in line]
        assert rows, reason
        assert any(sentence(reason) in row for row in rows), reason


def test_reason_table_rows_have_six_cells() -> None:
    for line in docs.reason_table().splitlines():
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        assert len(cells) == 6, line


def test_reason_table_describes_special_rows() -> None:
    table = docs.reason_table()
    assert "| 1 | ∅ → `queued` |" in table
    assert "| 22 | any → any |" in table
    assert "| 23 | X → X (no change) |" in table
    assert "cron window (no task edge)" in table


# --- README blocks -----------------------------------------------------------------------------


def test_update_readme_replaces_only_between_markers() -> None:
    out = docs.update_readme(README)
    assert "old diagram" not in out and "old table" not in out
    assert out.startswith("# jobtrail\n\nIntro stays.\n\n<!-- BEGIN GENERATED: state-diagram -->\n")
    assert "\n\nBetween stays.\n\n" in out
    assert out.endswith("<!-- END GENERATED: reason-codes -->\n\nOutro stays.\n")
    assert f"-->\n{docs.state_diagram()}\n<!-- END GENERATED: state-diagram -->" in out
    assert f"-->\n{docs.reason_table()}\n<!-- END GENERATED: reason-codes -->" in out


def test_update_readme_is_idempotent_and_clears_staleness() -> None:
    assert docs.stale_blocks(README) == list(BLOCKS)
    once = docs.update_readme(README)
    assert docs.update_readme(once) == once
    assert docs.stale_blocks(once) == []


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- BEGIN GENERATED: state-diagram -->",
        "<!-- END GENERATED: state-diagram -->",
        "<!-- BEGIN GENERATED: reason-codes -->",
        "<!-- END GENERATED: reason-codes -->",
    ],
)
def test_update_readme_raises_on_a_missing_marker(marker: str) -> None:
    with pytest.raises(ValueError, match=re.escape(marker)):
        docs.update_readme(README.replace(marker, ""))


def test_update_readme_raises_on_reversed_or_repeated_markers() -> None:
    begin, end = "<!-- BEGIN GENERATED: reason-codes -->", "<!-- END GENERATED: reason-codes -->"
    swapped = README.replace(begin, "@@").replace(end, begin).replace("@@", end)
    with pytest.raises(ValueError):
        docs.update_readme(swapped)
    with pytest.raises(ValueError):
        docs.update_readme(README + marked("state-diagram", ""))


# --- state-machine page and CLI ----------------------------------------------------------------


def test_state_machine_doc_has_intro_diagram_and_table(tmp_path: Path) -> None:
    page = docs.state_machine_doc()
    assert page.startswith("# ")
    assert docs.state_diagram() in page and docs.reason_table() in page
    target = tmp_path / "docs" / "state_machine.md"
    assert docs.write_state_machine_doc(target) is True
    assert target.read_text(encoding="utf-8") == page
    assert docs.write_state_machine_doc(target) is False


def test_cli_check_and_rewrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    assert docs.main(["--check", str(readme)]) == 1
    out = capsys.readouterr().out
    assert "state-diagram" in out and "reason-codes" in out
    assert readme.read_text(encoding="utf-8") == README  # --check changes nothing
    assert docs.main([str(readme)]) == 0
    assert docs.main(["--check", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == docs.update_readme(README)


def test_cli_reports_only_the_stale_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    fresh = docs.update_readme(README)
    readme.write_text(fresh.replace("| 13 |", "| 13b |"), encoding="utf-8")
    assert docs.main(["--check", str(readme)]) == 1
    out = capsys.readouterr().out
    assert "reason-codes" in out and "state-diagram" not in out


def test_cli_missing_marker_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n", encoding="utf-8")
    assert docs.main([str(readme)]) == 2
    assert "BEGIN GENERATED" in capsys.readouterr().err


def test_cli_state_machine_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "docs" / "state_machine.md"
    assert docs.main(["--check", "--state-machine", str(page)]) == 1  # missing is stale
    assert docs.main(["--state-machine", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == docs.state_machine_doc()
    assert docs.main(["--check", "--state-machine", str(page)]) == 0
    page.write_text("edited by hand\n", encoding="utf-8")
    assert docs.main(["--check", "--state-machine", str(page)]) == 1
    assert "stale" in capsys.readouterr().out


def test_runs_as_a_module(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    root = str(Path(docs.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "tools.docs", "--check", str(readme)]
    stale = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert stale.returncode == 1 and "state-diagram" in stale.stdout
    subprocess.run(cmd[:3] + [str(readme)], env=env, check=True, capture_output=True)
    assert subprocess.run(cmd, env=env, check=False, capture_output=True).returncode == 0


def test_a_file_may_hold_only_some_of_the_blocks(tmp_path: Path) -> None:
    only = "# front door\n\n" + marked("state-diagram", "\nold\n") + "\n\nrest\n"
    assert docs.stale_blocks(only) == ["state-diagram"]
    out = docs.update_readme(only)
    assert docs.stale_blocks(out) == [] and "reason-codes" not in out
    assert out.endswith("<!-- END GENERATED: state-diagram -->\n\nrest\n")


def test_generated_text_cites_no_missing_spec() -> None:
    """No generated page cites a section of a document the repository lacks (a section sign)."""
    for text in (docs.state_diagram(), docs.reason_table(), docs.state_machine_doc()):
        assert "\N{SECTION SIGN}" not in text
    table = docs.reason_table()
    assert "retry_budget_exhausted" in table and "max_elapsed" in table


# --- CLI reference -----------------------------------------------------------------------------


def test_cli_reference_has_every_verb_with_its_help() -> None:
    import click

    from jobtrail.cli import cli

    page = docs.cli_reference()
    assert page.startswith("# ")
    for name, command in cli.commands.items():
        assert f"\n## jobtrail {name}\n" in page
        assert f"Usage: jobtrail {name} " in page
        if isinstance(command, click.Group):
            for sub in command.commands:
                assert f"\n## jobtrail {name} {sub}\n" in page
    assert "--concurrency N" in page and "[default: 4; 1<=x<=1000]" in page
    assert page == docs.cli_reference()  # deterministic: no terminal width leaks in


def test_cli_reference_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "docs" / "cli.md"
    assert docs.main(["--check", "--cli", str(page)]) == 1  # missing is stale
    assert docs.main(["--cli", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == docs.cli_reference()
    assert docs.main(["--check", "--cli", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("[default: 4", "[default: 5"))
    assert docs.main(["--check", "--cli", str(page)]) == 1
    assert "--cli" in capsys.readouterr().out
