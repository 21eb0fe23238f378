"""The driver seam does not leak: outside ``store/`` no module runs a query by name
(``tx.one("name")``, ``tx.all``, ``tx.run``, ``tx.many``); it calls a named driver method. And
every public method of the seam says, in its docstring, who calls it and what it guarantees."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import jobtrail
from jobtrail.store.base import Driver

ROOT = Path(jobtrail.__file__).parent
STORE = ROOT / "store"
QUERY_CALLS = {"one", "all", "run", "many"}


def query_calls(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    return [
        f"{where}:{node.lineno} tx.{node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in QUERY_CALLS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "tx"
    ]


def test_no_query_names_outside_the_store() -> None:
    found = [
        call
        for path in sorted(ROOT.rglob("*.py"))
        if STORE not in path.parents
        for call in query_calls(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_the_check_sees_a_query_name() -> None:
    assert query_calls('def f(tx):\n    return tx.one("queue_get", {"name": "q"})\n', "x.py")


def undocumented(cls: type) -> list[str]:
    """The public methods of ``cls`` (its own and inherited: ``Statements``, ``Reads``) whose
    definition has no docstring."""
    missing = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        if inspect.isfunction(member) and not (member.__doc__ or "").strip():
            owner = next(c for c in cls.__mro__ if name in vars(c))
            missing.append(f"{owner.__module__}.{owner.__qualname__}.{name}")
    return missing


def test_every_public_driver_method_has_a_docstring() -> None:
    assert undocumented(Driver) == []


def test_the_check_sees_an_undocumented_method() -> None:
    class Seam(Driver):
        def queue_peek(self) -> None:
            pass

        def _private(self) -> None:
            pass

    assert undocumented(Seam) == [f"{__name__}.{Seam.__qualname__}.queue_peek"]
