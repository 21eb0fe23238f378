"""docs/guide.md's configuration tables say what the code does: every option of each callable
is listed with its real default, every ``JOBTRAIL_*`` variable the package reads is listed, and
every CLI option that has a default is listed with it.

A table follows a ``<!-- defaults: WHAT -->`` comment; WHAT is a dotted path to a callable,
``env`` or ``cli``. Rows are ``| `name` | `default` | meaning |``; a default is a Python
literal (or ``required`` / ``none`` where there is none).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import click
import pytest

from jobtrail.cli import cli

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide.md"
SHARED_OPTIONS = {"db", "app_ref", "as_json", "pooler", "listen_url", "help"}
UNSET = getattr(click.core, "UNSET", None)  # click >= 8.2: an option without a default


def tables() -> dict[str, dict[str, str]]:
    """``WHAT`` → {first cell: second cell} of the table after each marker."""
    out: dict[str, dict[str, str]] = {}
    text = GUIDE.read_text(encoding="utf-8")
    for match in re.finditer(r"<!-- defaults: (\S+) -->\n((?:\|.*\n)+)", text):
        rows: dict[str, str] = {}
        for line in match.group(2).splitlines()[2:]:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows[cells[0].strip("`")] = cells[1].strip("`")
        out[match.group(1)] = rows
    return out


def resolve(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(path)


def literal(cell: str) -> Any:
    return inspect.Parameter.empty if cell == "required" else ast.literal_eval(cell)


CALLABLES = [name for name in tables() if name not in ("env", "cli")]


def test_the_guide_has_the_tables() -> None:
    assert {"env", "cli", "jobtrail.App.__init__", "jobtrail.App.task"} <= set(tables())


@pytest.mark.parametrize("path", CALLABLES)
def test_callable_table_lists_every_option_with_its_default(path: str) -> None:
    rows = tables()[path]
    params = {
        name: p.default
        for name, p in inspect.signature(resolve(path)).parameters.items()
        if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    if path.endswith("Driver.__init__"):
        params.pop("url")  # the App's own argument
    assert set(rows) == set(params), f"{path}: table {sorted(rows)} vs code {sorted(params)}"
    for name, default in params.items():
        assert literal(rows[name]) == default, f"{path}({name}=...): guide {rows[name]}"


def test_every_environment_variable_the_package_reads_is_listed() -> None:
    src = ROOT / "src" / "jobtrail"
    names = set()
    for file in src.rglob("*.py"):
        names |= set(re.findall(r"\bJOBTRAIL_[A-Z][A-Z_]*[A-Z]\b", file.read_text()))
    assert names and names <= set(tables()["env"]), sorted(names - set(tables()["env"]))


def _options() -> dict[str, click.Option]:
    found: dict[str, click.Option] = {}

    def walk(group: click.Group, path: str) -> None:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                walk(command, f"{path} {name}")
            for param in command.params:
                if isinstance(param, click.Option) and param.name not in SHARED_OPTIONS:
                    found[f"{path} {name} {param.opts[0]}"] = param

    walk(cli, "jobtrail")
    return found


def test_every_cli_option_with_a_default_is_listed_with_it() -> None:
    rows = tables()["cli"]
    options = _options()
    with_default = {
        name
        for name, opt in options.items()
        if not opt.is_flag and not opt.multiple and opt.default not in (None, UNSET)
    }
    assert with_default <= set(rows), sorted(with_default - set(rows))
    for name, cell in rows.items():
        assert name in options, f"{name}: no such option"
        assert literal(cell) == options[name].default, f"{name}: guide {cell}"
