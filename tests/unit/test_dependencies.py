"""The base install runs everything the package imports: the demo, the worker, the CLI and
``jobtrail serve`` (a plain ``pip install jobtrail`` once said "serve needs fastapi and uvicorn
(No module named 'prometheus_client')"). Every third-party module imported anywhere in
``src/jobtrail`` belongs to a base dependency, except the optional ones named here."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "jobtrail"
#: imported only where the feature is asked for, with a message naming the extra
OPTIONAL: set[str] = {
    # the `otel` extra: imported only inside jobtrail/core/tracing.py's functions, after
    # tracing.available() found it installed; without it nothing is traced (SPEC §16.5)
    "opentelemetry",
    # the `django` extra: imported only by jobtrail.contrib.django (jobtrail[django])
    "django",
}


def base_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0] for d in project["dependencies"]}
    return {n.lower().replace("_", "-") for n in names}


def imported_top_level_modules() -> set[str]:
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"jobtrail", "__future__"}


def test_every_imported_module_is_a_base_dependency() -> None:
    dists = packages_distributions()
    base = base_dependencies()
    missing = {}
    for module in sorted(imported_top_level_modules() - OPTIONAL):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not names & base:
            missing[module] = sorted(names)
    assert not missing, f"imported but not a base dependency: {missing}"
