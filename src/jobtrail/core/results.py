"""What an attempt leaves behind for people: its return value as JSON text within the
``result_limit``, and a failure's traceback (frames only, the last 16 KiB) and class path."""

from __future__ import annotations

import json
import math
import traceback
from typing import Any

from ..model import validate
from ..model.errors import PermanentError
from ..model.machine import ErrorCategory

#: ``App(result_limit=)``'s default: 1 MiB of encoded JSON.
DEFAULT_RESULT_LIMIT = 1024 * 1024
#: How much of a formatted traceback a transition keeps (the end: the raising frame is last).
TRACEBACK_LIMIT = 16 * 1024

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class ResultNotStorable(PermanentError):  # noqa: N818 - an outcome, like PermanentError
    """A handler returned a value that cannot be stored: the attempt ends ``dead`` /
    ``permanent_error``, category ``invalid_input``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, category=ErrorCategory.INVALID_INPUT)


def encode_result(value: Any, limit: int) -> str | None:
    """The JSON text stored for a handler's return value (``None`` for ``None``); raises
    ``ResultNotStorable`` naming the type that cannot be encoded, or the size over ``limit``."""
    if value is None:
        return None
    try:
        text = _ENCODER.encode(value)
        size = len(text.encode("utf-8"))  # a lone surrogate: UnicodeEncodeError, a ValueError
        if "\\u0000" in text:  # a NUL or the six characters \u0000: _first_unstorable knows
            bad = _first_unstorable(value, 0)
            if bad is not None:
                raise ValueError(bad)
    except (TypeError, ValueError) as exc:
        raise ResultNotStorable(f"the return value cannot be stored: {_why(value, exc)}") from None
    if size > limit:
        raise ResultNotStorable(
            f"the return value is {size} bytes as JSON, over the result limit of {limit} bytes"
        )
    return text


def _why(value: Any, exc: Exception) -> str:
    bad = _first_unstorable(value, 0)
    if bad is not None:
        return bad
    return f"{type(exc).__name__}: {exc}"  # pragma: no cover - _first_unstorable finds it


def _first_unstorable(value: Any, depth: int) -> str | None:
    """What makes ``value`` impossible to store as JSON, in words (the first offender)."""
    if depth > 100:
        return "it is nested too deeply (or refers to itself)"
    if isinstance(value, str):
        return _unstorable_text(value)
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a JSON number"
    if isinstance(value, list | tuple):
        for item in value:
            bad = _first_unstorable(item, depth + 1)
            if bad is not None:
                return bad
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool) and key is not None:
                return f"a key of type {_type_name(key)} is not JSON-serialisable"
            if isinstance(key, str) and (bad := _unstorable_text(key)) is not None:
                return f"a key: {bad}"
            bad = _first_unstorable(item, depth + 1)
            if bad is not None:
                return bad
        return None
    return f"{_type_name(value)} is not JSON-serialisable"


def _unstorable_text(text: str) -> str | None:
    """Why a string of a return value cannot be stored (neither backend keeps a NUL in JSON,
    nor a lone surrogate in UTF-8), or ``None``."""
    if "\x00" in text:
        return "a string holding a NUL character (\\u0000)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "a string that is not valid Unicode (a lone surrogate)"
    return None


def _type_name(value: Any) -> str:
    cls = type(value)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def class_path(exc: BaseException) -> str:
    """The exception's class as ``module.QualName`` (``builtins.KeyError``, ``app.errors.Boom``)."""
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


def traceback_text(exc: BaseException) -> str:
    """The formatted traceback of ``exc`` (frames and the exception line; no local variables),
    its last ``TRACEBACK_LIMIT`` bytes (the raising frame is at the end)."""
    text = validate.kept_text("".join(traceback.format_exception(exc)))
    raw = text.encode("utf-8")
    if len(raw) <= TRACEBACK_LIMIT:
        return text
    marker = "... (traceback cut to its last 16 KiB)\n"
    tail = raw[-(TRACEBACK_LIMIT - len(marker)) :].decode("utf-8", errors="ignore")
    return marker + tail


def raising_frame(text: str | None) -> str | None:
    """``file:line`` of the frame that raised, read from a stored traceback (its last
    ``File "...", line N`` entry); ``None`` when there is none."""
    if not text:
        return None
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        if stripped.startswith('File "'):
            end = stripped.find('", line ', 6)
            if end < 0:
                continue
            path = stripped[6:end]
            number = stripped[end + 8 :].split(",", 1)[0]
            return f"{path}:{number}"
    return None
