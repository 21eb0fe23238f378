"""Typed payloads: a handler whose payload parameter is annotated with a dataclass
or a pydantic model gets that type rebuilt from the stored JSON, and ``enqueue`` takes an
instance of it (or a dict of its fields), checked before anything is written.

Dataclasses need nothing beyond the standard library: their fields are rebuilt by their
annotations (nested dataclasses, lists and dicts of them, ``X | None``), and fields annotated
``int``, ``float``, ``str`` or ``bool`` are type-checked. Pydantic models are validated by
pydantic itself (``model_validate`` / ``model_dump(mode="json")``); pydantic is imported only
when a handler uses one.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from ..model.errors import PermanentError


def payload_type(handler: Callable[..., Any]) -> type | None:
    """The dataclass or pydantic model the handler's payload parameter (its second) is
    annotated with, else ``None`` (plain JSON, as before)."""
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return None
    if len(params) < 2:
        return None
    name = params[1].name
    try:
        hints = typing.get_type_hints(handler)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: plain JSON
        return None
    hint = hints.get(name)
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_model(hint)):
        return hint
    return None


def dump(kind: str, cls: type, payload: Any) -> Any:
    """The JSON value stored for ``payload`` (an instance of ``cls``, or a dict of its fields,
    which must rebuild into one), checked now: a ``TypeError``/``ValueError`` naming the kind,
    the type and the field, before anything is written."""
    what = f"payload of kind {kind!r} ({cls.__name__})"
    if _is_model(cls):
        if isinstance(payload, cls):
            return payload.model_dump(mode="json")  # type: ignore[attr-defined]
        if not isinstance(payload, dict):
            raise TypeError(f"{what} must be a {cls.__name__} or a dict of its fields")
        try:
            model = cls.model_validate(payload)  # type: ignore[attr-defined]
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ValueError(f"{what} is not valid: {exc}") from None
        return model.model_dump(mode="json")
    if isinstance(payload, cls):
        data = dataclasses.asdict(payload)  # type: ignore[call-overload]
        build(cls, data, what)  # the stored JSON must rebuild (and have the right types)
        return data
    if not isinstance(payload, dict):
        raise TypeError(f"{what} must be a {cls.__name__} or a dict of its fields")
    build(cls, payload, what)
    return payload


def load(kind: str, cls: type, stored: Any) -> Any:
    """The handler's argument rebuilt from the stored JSON. A payload that no longer fits
    the type (stored by older code, or by a raw enqueue) is a ``PermanentError``: retrying
    cannot make it fit."""
    what = f"stored payload of kind {kind!r} ({cls.__name__})"
    try:
        if _is_model(cls):
            return cls.model_validate(stored)  # type: ignore[attr-defined]
        return build(cls, stored, what)
    except (TypeError, ValueError) as exc:
        raise PermanentError(str(exc) if str(exc).startswith(what) else f"{what}: {exc}") from None


def build(hint: Any, value: Any, path: str) -> Any:
    """``value`` (decoded JSON) as ``hint``: a dataclass from a dict of its fields, lists and
    dicts item by item, ``X | None``; scalars checked, anything else taken as it is."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return build(option, value, path)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise TypeError(errors[0] if errors else f"{path} does not match {hint}")
    if origin is list:
        if not isinstance(value, list):
            raise TypeError(f"{path} must be a list, not {type(value).__name__}")
        (item,) = typing.get_args(hint) or (Any,)
        return [build(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{path} must be an object, not {type(value).__name__}")
        args = typing.get_args(hint)
        item = args[1] if len(args) == 2 else Any
        return {k: build(item, v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, value, path)
    if isinstance(hint, type) and _is_model(hint):
        return hint.model_validate(value)  # type: ignore[attr-defined]
    if hint in (int, str, bool):
        if type(value) is not hint:
            raise TypeError(f"{path} must be {hint.__name__}, not {type(value).__name__}")
    elif hint is float and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise TypeError(f"{path} must be a number, not {type(value).__name__}")
    return value


def _dataclass(cls: type, value: Any, path: str) -> Any:
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise TypeError(f"{path} must be an object of {cls.__name__}'s fields")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise TypeError(
            f"{path} has unknown fields {unknown} ({cls.__name__} has {sorted(fields)})"
        )
    missing = [
        name
        for name, f in fields.items()
        if name not in value
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise TypeError(f"{path} lacks the required fields {missing}")
    module = sys.modules.get(cls.__module__)
    hints = typing.get_type_hints(cls, vars(module) if module else None)
    args = {name: build(hints.get(name, Any), v, f"{path}.{name}") for name, v in value.items()}
    return cls(**args)


def _is_model(cls: type) -> bool:
    """A pydantic model, without importing pydantic unless it is loaded already."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(cls, type) and issubclass(cls, pydantic.BaseModel)
