"""The layer contract: jobtrail's modules import only from their own floor or the floors below,
and no two modules import each other (directly or round a circle).

Floors, top to bottom (``FLOORS``): people and programs come in through the CLI, the HTTP API
and the dashboard; below them the ``App`` facade; then the moving parts (worker, sweeper,
scheduler, outbox); then the pure decisions, the handler's context and the narratives; then the
store; then errors, models and the small value modules; and ``machine.py`` at the bottom,
importing nothing of ours.

Imports under ``if TYPE_CHECKING:`` are left out (they never run). Imports inside functions
(lazy ones) count like any other, unless ``ALLOWED_UPWARD`` names them with a reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jobtrail

ROOT = Path(jobtrail.__file__).parent
PACKAGE = "jobtrail"

#: Top floor first; each floor but the entry is a package, so the folders show the floors. A
#: module belongs to the floor of the longest prefix it matches (the module itself or a package
#: containing it); the root package matches only itself, so a new module must be placed.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    (
        "entry",
        (
            "jobtrail",  # the root package: re-exports the public names
            "jobtrail.__main__",
            "jobtrail.cli",
            "jobtrail.web",
            "jobtrail.contrib",  # integrations (Django), entry points of other frameworks
        ),
    ),
    ("app", ("jobtrail.app",)),
    ("parts", ("jobtrail.worker", "jobtrail.services")),
    ("core", ("jobtrail.core",)),
    ("store", ("jobtrail.store",)),
    ("model", ("jobtrail.model",)),
]

#: Upward imports that are allowed, (importer, imported) -> why. Keep it short.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

#: Within a package, modules that must not import others of the same package: the seam does
#: not know its implementations, nor the worker's parts the pump above them.
INNER_FLOORS: list[list[tuple[str, ...]]] = [
    [
        ("jobtrail.store.open",),
        ("jobtrail.store.postgres", "jobtrail.store.sqlite"),
        ("jobtrail.store.base",),
        ("jobtrail.store.types", "jobtrail.store.queries", "jobtrail.store.failures"),
    ],
    [
        (
            "jobtrail.cli.commands",
            "jobtrail.cli.ops",
            "jobtrail.cli.serve",
            "jobtrail.cli.dashboard",
            "jobtrail.cli.workers",
        ),
        ("jobtrail.cli.base",),
        ("jobtrail.cli.format",),
    ],
    [
        # the facade holds the parts; a part is given the parts below it that it uses
        ("jobtrail.app.facade",),
        ("jobtrail.app.aio",),
        ("jobtrail.app.actions", "jobtrail.app.webhooks", "jobtrail.app.views"),
        ("jobtrail.app.reads", "jobtrail.app.ops", "jobtrail.app.effects"),
        (
            "jobtrail.app.enqueue",
            "jobtrail.app.rates",
            "jobtrail.app.cron",
            "jobtrail.app.replays",
            "jobtrail.app.workers",
        ),
        ("jobtrail.app.core", "jobtrail.app.forward"),
    ],
    [
        ("jobtrail.model.i18n", "jobtrail.model.timeparse"),
        (
            "jobtrail.model.validate",
            "jobtrail.model.errors",
            "jobtrail.model.models",
            "jobtrail.model.kinds",
            "jobtrail.model.live",
        ),
        ("jobtrail.model.machine",),
    ],
    [
        # the pump holds the parts; a part is given the parts below it that it uses
        ("jobtrail.worker.pump",),
        ("jobtrail.worker.lease", "jobtrail.worker.handoff"),
        ("jobtrail.worker.handlers",),
        ("jobtrail.worker.outcomes",),
        ("jobtrail.worker.state",),
        ("jobtrail.worker.pool", "jobtrail.worker.options", "jobtrail.worker.presence"),
    ],
]


def module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports_of(source: str, me: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ours that ``source`` imports when it runs (lazy imports included)."""
    found: set[str] = set()

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = me if is_package else me.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        return f"{base}.{node.module}" if node.module else base

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If):
                test = child.test
                name = getattr(test, "id", None) or getattr(test, "attr", None)
                if name == "TYPE_CHECKING":
                    for sub in child.orelse:
                        visit(sub)
                    continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = resolve(child)
                # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module
                subs = {f"{target}.{a.name}" for a in child.names} & known
                found.update(subs or {target})
            visit(child)

    visit(ast.parse(source))
    return {m for m in found if m in known}


def graph() -> dict[str, set[str]]:
    files = modules()
    known = set(files)
    out: dict[str, set[str]] = {}
    for mod, path in files.items():
        targets = imports_of(
            path.read_text(encoding="utf-8"), mod, path.name == "__init__.py", known
        )
        # a package importing its own submodules (re-exports, registration) is no edge
        out[mod] = {t for t in targets if t != mod and not t.startswith(mod + ".")}
    return out


def floor_of(mod: str) -> int:
    best: tuple[int, int] | None = None  # (prefix length, floor): the longest prefix wins
    for i, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if mod == prefix or (prefix != PACKAGE and mod.startswith(prefix + ".")):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), i)
    assert best is not None, f"{mod} is on no floor: add it to FLOORS in {__file__}"
    return best[1]


def upward_imports(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, targets in sorted(g.items()):
        for target in sorted(targets):
            if floor_of(target) < floor_of(mod) and (mod, target) not in ALLOWED_UPWARD:
                bad.append(
                    f"{mod} ({FLOORS[floor_of(mod)][0]}) imports {target} "
                    f"({FLOORS[floor_of(target)][0]}), a floor above it"
                )
    for floors in INNER_FLOORS:

        def level(m: str, floors: list[tuple[str, ...]] = floors) -> int | None:
            for i, names in enumerate(floors):
                if any(m == n or m.startswith(n + ".") for n in names):
                    return i
            return None

        for mod, targets in sorted(g.items()):
            lm = level(mod)
            for target in sorted(targets):
                lt = level(target)
                if lm is not None and lt is not None and lt < lm:
                    bad.append(f"{mod} imports {target}, above it in its package")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    seen: set[str] = set()
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def dfs(v: str) -> None:
        seen.add(v)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in seen:
                dfs(w)
            elif w in on:
                found.append([*stack[stack.index(w) :], w])
        stack.pop()
        on.discard(v)

    for v in sorted(g):
        if v not in seen:
            dfs(v)
    return found


def test_every_module_is_on_a_floor() -> None:
    for mod in modules():
        floor_of(mod)


def test_the_package_root_holds_only_the_entry_and_packages() -> None:
    """A module belongs in the package of its floor; the root keeps the public names
    (``__init__.py``), ``python -m jobtrail`` (``__main__.py``) and ``py.typed``."""
    stray = [
        p.name
        for p in ROOT.iterdir()
        if p.name not in ("__init__.py", "__main__.py", "py.typed", "__pycache__")
        and not (p.is_dir() and (p / "__init__.py").exists())
    ]
    assert sorted(stray) == []


def test_no_module_imports_from_a_floor_above() -> None:
    assert upward_imports(graph()) == []


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_machine_imports_nothing_of_ours() -> None:
    assert graph()["jobtrail.model.machine"] == set()


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("jobtrail.worker.pump", "from ..app import App"),
        ("jobtrail.store.base", "from .open import open_driver"),
        ("jobtrail.core.decide", "def f() -> None:\n    from ..cli import cli"),
    ],
)
def test_the_check_sees_an_upward_import(module: str, line: str) -> None:
    """The contract is not vacuous: an upward import (lazy ones included) is caught."""
    g = graph()
    files = modules()
    path = files[module]
    source = path.read_text(encoding="utf-8") + "\n" + line + "\n"
    g[module] = {
        t
        for t in imports_of(source, module, path.name == "__init__.py", set(files))
        if t != module and not t.startswith(module + ".")
    }
    assert upward_imports(g) != []


def test_the_check_sees_a_cycle() -> None:
    g = graph()
    g["jobtrail.model.machine"] = {"jobtrail.model.errors"}
    assert cycles(g) != []


def test_type_checking_imports_are_exempt() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .app import App\n"
    assert imports_of(source, "jobtrail.worker.pump", False, set(modules())) == set()
