"""README stays honest: its test command is what CI runs, its example runs as written, it stays
a short front door, and its generated block is fresh."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import test_doc_links as doc_links

from tools import docs

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def code_blocks(text: str, lang: str = "sh") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    readme = README.read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for block in code_blocks(readme) for line in block.splitlines()]
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in ci


def test_ci_runs_the_pooled_cases_its_readme_command_leaves_out() -> None:
    """CI's main run may skip the cases through PgBouncer (``JOBTRAIL_TEST_POOLED=skip``) only
    because a second process runs just those and CI waits for it."""
    ci = (ROOT / ".ci" / "run").read_text()
    if "JOBTRAIL_TEST_POOLED=skip" in ci:
        assert "JOBTRAIL_TEST_POOLED=only" in ci
        assert 'wait "$POOLED"' in ci


def test_ci_runs_the_part_its_main_run_leaves_out() -> None:
    """CI's main run may take only ``JOBTRAIL_TEST_PART=rest`` because a second process runs
    the process-driving part (whole or as its two halves) and CI waits for it (and fails with
    it)."""
    ci = (ROOT / ".ci" / "run").read_text()
    if "JOBTRAIL_TEST_PART=rest" in ci:
        whole = re.search(r"JOBTRAIL_TEST_PART=processes\s", ci)
        halves = all(f"JOBTRAIL_TEST_PART=processes-{n}" in ci for n in (1, 2))
        assert whole or halves
        assert 'wait "$PROCS"' in ci


def test_ci_runs_the_wheel_step_and_waits_for_it() -> None:
    """The package as a user installs it: .ci/run starts .ci/wheel in the background, fails
    with it and prints its summary line."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".ci/wheel >.ci-wheel.log 2>&1 &" in ci and 'wait "$WHEEL"' in ci
    assert "tail -n 1 .ci-wheel.log" in ci
    wheel = (ROOT / ".ci" / "wheel").read_text()
    assert "pip wheel" in wheel
    assert '"$BIN/jobtrail" demo' in wheel and '"$BIN/jobtrail" serve' in wheel


def test_readme_demo_command_installs_and_runs_the_demo() -> None:
    """The first command installs jobtrail from the checkout without an extra (the demo needs
    none of the server's; .ci/wheel runs the demo from the base install of the built wheel) and
    runs it; not from the package index, where jobtrail is not published yet."""
    commands = [
        line.strip() for block in code_blocks(README.read_text()) for line in block.splitlines()
    ]
    first = commands[0]
    assert "pip install . " in first and "jobtrail demo" in first, first
    assert '"$BIN/jobtrail" demo' in (ROOT / ".ci" / "wheel").read_text()


def repository() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return str(project["urls"]["Repository"]).rstrip("/")


def test_readme_links_are_absolute_and_reach_the_checkouts_files() -> None:
    """The package index shows README.md without the repository around it: a relative link
    is broken there. Every link is absolute; one into the repository names a file (and
    heading) this checkout has."""
    prefix = re.escape(repository()) + r"/(?:blob|tree)/main/"
    broken = []
    for target in doc_links.links(README):
        if not re.match(r"https?://", target):
            broken.append(f"{target}: relative")
            continue
        inside = re.match(prefix + r"([^#]*)(?:#(.*))?$", target)
        if target.startswith(repository()) and not inside:
            broken.append(f"{target}: not under {repository()}/blob/main/")
        elif inside:
            path, anchor = ROOT / inside.group(1), inside.group(2)
            if not path.exists():
                broken.append(f"{target}: no such file")
            elif anchor and anchor not in doc_links.anchors(path):
                broken.append(f"{target}: no heading #{anchor}")
    assert broken == []


def test_generated_blocks_are_current() -> None:
    readme = README.read_text()
    assert "<!-- BEGIN GENERATED: state-diagram -->" in readme
    assert docs.stale_blocks(readme) == []
    assert (ROOT / "docs" / "state_machine.md").read_text() == docs.state_machine_doc()
    assert (ROOT / "docs" / "cli.md").read_text() == docs.cli_reference()


def test_ci_checks_every_generated_page() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m tools.docs --check README.md" in ci
    assert ".venv/bin/python -m tools.docs --check --state-machine docs/state_machine.md" in ci
    assert ".venv/bin/python -m tools.docs --check --cli docs/cli.md" in ci


def test_readme_is_a_front_door() -> None:
    """At most 10 KB; the manual lives in docs/."""
    assert len(README.read_bytes()) <= 10 * 1024


def test_readme_example_runs_as_written(tmp_path: Path) -> None:
    """Every Python block of the README, saved under the name its first line gives
    (``# tasks.py``), then the shell block that runs them, line by line, in a fresh directory:
    no undefined names, no missing step."""
    readme = README.read_text()
    for block in code_blocks(readme, "python"):
        first = block.splitlines()[0]
        name = re.fullmatch(r"# (\w+\.py)(:.*)?", first)
        assert name, f"a README Python block must start with '# <file>.py', not {first!r}"
        (tmp_path / name.group(1)).write_text(block)
    script = next(b for b in code_blocks(readme) if "python tasks.py" in b)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    outputs = []
    for line in script.splitlines():
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        if argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        elif argv[0] == "jobtrail":
            argv = [sys.executable, "-m", "jobtrail", *argv[1:]]
        proc = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        outputs.append(proc.stdout)
    text = "\n".join(outputs)
    assert "mail to ada@example.com" in text and "mail to grace@example.com" in text
    assert "mail to alan@example.com" in text
    assert "state:      succeeded" in outputs[0]  # the explanation tasks.py prints
    assert text.count("send_welcome") >= 3  # jobtrail list shows the three tasks
