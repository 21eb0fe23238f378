"""The private path of webhook tasks stays private: ``_new_task`` makes a webhook
kind only with ``webhook_route=True``, and the one caller that passes it is
``receive_webhook``, the route of a verified delivery. No public method takes the flag, so no
caller's arguments can reach it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import jobtrail

SRC = Path(jobtrail.__file__).resolve().parent


def callers_passing_the_flag() -> set[str]:
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                for kw in node.keywords:
                    if kw.arg is None:  # **kwargs could carry it: refuse that too
                        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                        if name == "_new_task":
                            found.add(f"{path.name}:{fn.name} (**)")
                    elif kw.arg == "webhook_route" and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value is False
                    ):
                        found.add(f"{path.name}:{fn.name}")
    return found


def test_only_the_webhook_route_passes_webhook_route() -> None:
    assert callers_passing_the_flag() == {"webhooks.py:receive_webhook"}


def test_no_public_method_takes_the_flag() -> None:
    for name, member in inspect.getmembers(jobtrail.App, callable):
        if name.startswith("_"):
            continue
        assert "webhook_route" not in inspect.signature(member).parameters, name
