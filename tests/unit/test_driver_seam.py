"""The driver seam does not leak: outside ``store/`` no module runs a query by name
(``tx.one("name")``, ``tx.all``, ``tx.run``, ``tx.many``); it calls a named driver method."""

from __future__ import annotations

import ast
from pathlib import Path

import jobtrail

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
