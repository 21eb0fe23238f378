"""README stays honest: its test command is what CI runs, and its generated blocks are fresh."""

from __future__ import annotations

import re
from pathlib import Path

from jobtrail import docs

ROOT = Path(__file__).resolve().parents[2]


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for block in code_blocks(readme) for line in block.splitlines()]
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in ci


def test_readme_demo_command_installs_and_runs_the_demo() -> None:
    commands = [
        line.strip()
        for block in code_blocks((ROOT / "README.md").read_text())
        for line in block.splitlines()
    ]
    assert any("pip install -e ." in c and "jobtrail demo" in c for c in commands)


def test_generated_blocks_are_current() -> None:
    assert docs.stale_blocks((ROOT / "README.md").read_text()) == []
    assert (ROOT / "docs" / "state_machine.md").read_text() == docs.state_machine_doc()
    assert (ROOT / "docs" / "cli.md").read_text() == docs.cli_reference()


def test_ci_checks_every_generated_page() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m jobtrail.docs --check README.md" in ci
    assert ".venv/bin/python -m jobtrail.docs --check --state-machine docs/state_machine.md" in ci
    assert ".venv/bin/python -m jobtrail.docs --check --cli docs/cli.md" in ci
