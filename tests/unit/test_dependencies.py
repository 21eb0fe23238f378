"""The base install runs the library, the demo, the worker and the CLI; ``jobtrail[server]``
adds what ``jobtrail serve`` needs (the HTTP API, webhooks, the dashboard, /metrics). Every
third-party module imported in ``src/jobtrail`` belongs to a base dependency, except the
optional ones named here and, in the server's own files, the ``server`` extra's. (A plain
``pip install jobtrail`` once said "serve needs fastapi and uvicorn (No module named
'prometheus_client')"; since issue 38 it brings no web framework at all, and
tests/acceptance/test_cli_base_install.py runs the core with the extra's modules refused.)"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "jobtrail"
#: imported only where the feature is asked for, with a message naming the extra
OPTIONAL: set[str] = {
    # the `otel` extra: imported only inside jobtrail/core/tracing.py's functions, after
    # tracing.available() found it installed; without it nothing is traced
    "opentelemetry",
    # the `django` extra: imported only by jobtrail.contrib.django (jobtrail[django])
    "django",
}


#: the files of ``jobtrail serve``: only they may import the ``server`` extra's modules (the
#: CLI's ``serve`` and ``dashboard`` verbs import them inside a function)
SERVER_FILES = ("web/", "cli/serve.py")


def _names(requirements: list[str]) -> set[str]:
    names = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0] for d in requirements}
    return {n.lower().replace("_", "-") for n in names}


def project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


def base_dependencies() -> set[str]:
    return _names(project()["dependencies"])


def server_dependencies() -> set[str]:
    return _names(project()["optional-dependencies"]["server"])


def in_server(path: Path) -> bool:
    return path.relative_to(PACKAGE).as_posix().startswith(SERVER_FILES)


def imported_top_level_modules(server: bool = False) -> set[str]:
    """The third-party modules the package imports: outside the server's files, or (with
    ``server``) in them."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if in_server(path) != server:
            continue
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


def test_the_server_imports_only_base_and_server_dependencies() -> None:
    dists = packages_distributions()
    allowed = base_dependencies() | server_dependencies()
    missing = {}
    for module in sorted(imported_top_level_modules(server=True) - OPTIONAL):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not names & allowed:
            missing[module] = sorted(names)
    assert not missing, f"imported by the server but in no extra: {missing}"


def test_the_base_install_has_no_web_framework() -> None:
    base = base_dependencies()
    for name in ("fastapi", "starlette", "uvicorn", "pydantic", "prometheus-client"):
        assert name not in base
        assert name in server_dependencies()
    extras = project()["optional-dependencies"]
    assert extras["web"] == ["jobtrail[server]"]  # the old name still installs it
    assert "jobtrail[server]" in extras["dev"]
