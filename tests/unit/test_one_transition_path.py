"""One transition path, provably: the driver methods that write a task's state
(``store.base.STATE_WRITERS``) are called only from ``core/transition.py`` (and by the drivers
themselves, inside ``store/``), and a ``Move`` is built from a ``Decision`` in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import jobtrail
from jobtrail.store.base import STATE_WRITERS, Driver

ROOT = Path(jobtrail.__file__).parent
TRANSITION = ROOT / "core" / "transition.py"
STORE = ROOT / "store"


def calls(path: Path, names: set[str]) -> list[str]:
    """``file:line name`` of every call ``<anything>.name(...)`` in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ]


def outside(*allowed: Path) -> list[Path]:
    return [
        p
        for p in sorted(ROOT.rglob("*.py"))
        if p not in allowed and not any(a in p.parents for a in allowed)
    ]


def test_state_writers_are_driver_methods() -> None:
    for name in STATE_WRITERS:
        assert callable(getattr(Driver, name, None)), name


def test_state_writers_are_called_only_from_the_transition_module() -> None:
    found = [c for p in outside(TRANSITION, STORE) for c in calls(p, set(STATE_WRITERS))]
    assert found == []


def test_the_transition_module_calls_them() -> None:
    called = {c.rsplit(" ", 1)[1] for c in calls(TRANSITION, set(STATE_WRITERS))}
    # the inserts' variants are reached through task_insert inside the drivers
    assert called >= set(STATE_WRITERS) - {"task_insert_many"}


def test_the_check_sees_a_call_elsewhere(tmp_path: Path) -> None:
    rogue = ROOT / "worker" / "pump.py"
    source = rogue.read_text(encoding="utf-8") + "\n\ndef f(d):\n    d.task_move(None, None)\n"
    tree = ast.parse(source)
    assert any(
        isinstance(n, ast.Call) and getattr(n.func, "attr", "") in STATE_WRITERS
        for n in ast.walk(tree)
    )


def test_a_move_is_built_from_a_decision_in_one_place() -> None:
    """``Move(... to_state=decision.to_state ...)``: only ``transition.move_for`` does it."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", "") == "Move"
                    and any(
                        isinstance(kw.value, ast.Attribute) and kw.value.attr == "to_state"
                        for kw in node.keywords
                        if kw.arg == "to_state"
                    )
                ):
                    found.append(f"{path.relative_to(ROOT)}:{fn.name}")
    assert found == ["core/transition.py:move_for"]
