"""The Python in the docs is Python, and the Celery page names only what jobtrail has.

Every ``python`` block of README.md and docs/*.md compiles (top-level ``await`` allowed; a
block indented in a list item is dedented first). docs/celery.md pairs each Celery idiom with
jobtrail's: its blocks start ``# Celery`` or ``# jobtrail``, and in the jobtrail ones (and in
its prose) every ``app.X``, ``ctx.X`` and ``jobtrail.X`` exists, every keyword argument is one
the callable takes, and every ``jobtrail VERB --option`` is a real verb and option — or is one
of the release's fixed new names, in a section that says "new in 0.3".
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import shlex
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

import jobtrail
from jobtrail.app.handles import TaskHandle
from jobtrail.cli import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CELERY = ROOT / "docs" / "celery.md"
FENCE = re.compile(r"^([ \t]*)```python[^\n]*\n(.*?)^\1```", re.S | re.M)
HEADING = re.compile(r"^#{2,3} ", re.M)

#: The release's fixed new names (durable handlers and the controls users ask for), landing
#: beside this page: until they exist the page may name them in a section marked "new in 0.3".
NEW_NAMES = {
    "sleep",
    "sleep_until",
    "wait_for_event",
    "send_event",
    "spawn",
    "join",
    "now",
    "uuid",
    "patched",
    "previous_result",
    "ChildFailed",
    "WaitTimedOut",
}
NEW_KEYWORDS = {
    "debounce_key",
    "debounce",
    "debounce_max",
    "unique_for",
    "unique_while",
    "concurrency_key",
    "concurrency_per_key",
    "expires_in",
    "expires_at",
    "kind",  # set_rate(queue, ..., kind=)
    "from_step",
}
NEW = "new in 0.3"


def python_blocks(text: str) -> Iterator[tuple[int, str]]:
    """(line number, dedented source) of each ``python`` block."""
    for match in FENCE.finditer(text):
        yield text.count("\n", 0, match.start(2)) + 1, textwrap.dedent(match.group(2))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_compile(page: Path) -> None:
    errors = []
    for line, source in python_blocks(page.read_text(encoding="utf-8")):
        try:
            compile(source, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as exc:
            errors.append(f"line {line + (exc.lineno or 1) - 1}: {exc.msg}")
    assert errors == [], f"{page.relative_to(ROOT)}: {errors}"


# --- the Celery page ---------------------------------------------------------------------------


def sections(text: str) -> list[str]:
    """The page cut at its ``##`` and ``###`` headings."""
    starts = [0, *(m.start() for m in HEADING.finditer(text)), len(text)]
    return [text[a:b] for a, b in zip(starts, starts[1:], strict=False) if b > a]


def celery_sections() -> list[str]:
    return sections(CELERY.read_text(encoding="utf-8"))


def label(source: str) -> str | None:
    """``Celery`` or ``jobtrail``: whose code the block is, by its first line."""
    match = re.match(r"# (Celery|jobtrail)\b", source)
    return match.group(1) if match else None


def test_every_celery_block_is_labelled_and_paired() -> None:
    text = CELERY.read_text(encoding="utf-8")
    assert "docs/celery.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(celery.md)" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    paired = 0
    for section in sections(text):
        labels = [label(src) for _, src in python_blocks(section)]
        assert None not in labels, section.splitlines()[0]
        if labels:
            assert {"Celery", "jobtrail"} <= set(labels), section.splitlines()[0]
            paired += 1
    assert paired >= 20


def resolve(owner: str, name: str) -> Any:
    """``app.X``, ``ctx.X``, ``jobtrail.X`` (a module of the package too), or None."""
    if owner == "app":
        return getattr(jobtrail.App, name, None)
    if owner == "ctx":
        return getattr(jobtrail.Context, name, None)
    if hasattr(jobtrail, name):
        return getattr(jobtrail, name)
    try:
        return importlib.import_module(f"jobtrail.{name}")
    except ModuleNotFoundError:
        return None


def keywords_taken(fn: Any, name: str) -> set[str] | None:
    """The keyword arguments ``fn`` takes; None when it takes any."""
    params = inspect.signature(fn).parameters.values()
    taken = {p.name for p in params if p.kind is not p.VAR_KEYWORD}
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return taken
    if name == "periodic":  # **task_options: those of @app.task
        return taken | set(inspect.signature(jobtrail.App.task).parameters)
    return None


def problems_in_block(source: str) -> tuple[list[str], set[str]]:
    """What the jobtrail block names that jobtrail does not have, and the new names it uses."""
    problems: list[str] = []
    new: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("app", "ctx", "jobtrail")
        ):
            if resolve(node.value.id, node.attr) is None:
                if node.attr in NEW_NAMES:
                    new.add(node.attr)
                else:
                    problems.append(f"{node.value.id}.{node.attr}: no such name")
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func, owner = node.func, node.func.value
        target = None
        if isinstance(owner, ast.Name) and owner.id in ("app", "ctx", "jobtrail"):
            target = resolve(owner.id, func.attr)
        elif func.attr == "enqueue":  # a task handle's
            target = TaskHandle.enqueue
        if target is None or not callable(target):
            continue
        taken = keywords_taken(target, func.attr)
        for keyword in node.keywords:
            if keyword.arg is None or taken is None or keyword.arg in taken:
                continue
            if keyword.arg in NEW_KEYWORDS:
                new.add(keyword.arg)
            else:
                problems.append(f"{func.attr}({keyword.arg}=): no such argument")
    return problems, new


def prose(section: str) -> str:
    """The section without its code blocks."""
    return FENCE.sub("", section)


def test_celery_page_names_only_what_jobtrail_has() -> None:
    problems: list[str] = []
    for section in celery_sections():
        title = section.splitlines()[0]
        new: set[str] = set()
        for _, source in python_blocks(section):
            if label(source) == "jobtrail":
                found, used = problems_in_block(source)
                problems += [f"{title}: {p}" for p in found]
                new |= used
        for owner, name in re.findall(r"\b(app|ctx|jobtrail)\.([A-Za-z_]\w*)", prose(section)):
            if resolve(owner, name) is None:
                if name in NEW_NAMES:
                    new.add(name)
                else:
                    problems.append(f"{title}: {owner}.{name}: no such name")
        for name in re.findall(r"\b(\w+)=", prose(section)):
            if name in NEW_KEYWORDS - {"kind"}:
                new.add(name)
        if new and NEW not in section:
            problems.append(f"{title}: {sorted(new)} without '{NEW}'")
    assert problems == []


def command_lines(text: str) -> Iterator[str]:
    """``jobtrail VERB ...`` in inline code and in the code blocks' lines and comments."""
    text = re.sub(r"^```.*?^```", lambda m: m.group(0).replace("`", ""), text, flags=re.S | re.M)
    for span in re.findall(r"`([^`]+)`", text):
        yield from re.findall(r"(?:^|\s)(jobtrail [a-z].*)", span.replace("\n", " "))
    for line in text.splitlines():
        yield from re.findall(r"#\s*(jobtrail [a-z].*)", line)


def check_command(line: str) -> list[str]:
    argv = shlex.split(line)[1:]
    command: click.Command = cli
    path = ["jobtrail"]
    while argv and isinstance(command, click.Group) and not argv[0].startswith("-"):
        sub = command.commands.get(argv[0])
        if sub is None:
            break
        command, path = sub, [*path, argv.pop(0)]
    if command is cli:
        return [f"{line}: no such verb"]
    options = {opt for param in command.params for opt in param.opts}
    return [
        f"{line}: {' '.join(path)} has no {a}"
        for a in argv
        if a.startswith("--") and a not in options
    ]


def test_celery_page_commands_exist() -> None:
    lines = list(command_lines(CELERY.read_text(encoding="utf-8")))
    assert len(lines) >= 10
    assert [problem for line in lines for problem in check_command(line)] == []


def test_the_checks_can_fail() -> None:
    """A name, an argument or an option jobtrail does not have is found."""
    problems, new = problems_in_block(
        "# jobtrail\napp.enqeue('k')\nh.enqueue({}, countdown=3)\nctx.retry()\n"
        "app.enqueue('k', expires_in=5)\nctx.spawn('a', 'k')\n"
    )
    assert sorted(problems) == [
        "app.enqeue: no such name",
        "ctx.retry: no such name",
        "enqueue(countdown=): no such argument",
    ]
    assert new <= {"expires_in", "spawn"}
    assert check_command("jobtrail revoke 3") == ["jobtrail revoke 3: no such verb"]
    assert check_command("jobtrail worker --autoscale 4") == [
        "jobtrail worker --autoscale 4: jobtrail worker has no --autoscale"
    ]
    assert check_command("jobtrail cron list") == []
    assert list(command_lines("see `jobtrail list\n--state dead`\n```sh\njobtrail stats # x\n```"))
