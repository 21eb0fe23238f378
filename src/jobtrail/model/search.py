"""What a person types in the dashboard's search box, read into one search term.

    payload.order_id = 17        a payload field (dotted path) equal to a JSON value
    payload.customer.email: a@b  (``:`` works like ``=``; a value that is not JSON is text)
    error: timeout               error text (the task's last error), case-insensitive substring
    key: note-42                 an idempotency key (``idempotency_key = note-42`` too)
    tenant: acme                 a tenant
    17                           a task id; any other text: an id or an idempotency key

``parse`` raises ``ValueError`` naming what is wrong (an HTTP 422 in the dashboard).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

FIELDS = {
    "payload": "payload",
    "error": "error",
    "key": "key",
    "idempotency_key": "key",
    "tenant": "tenant",
    "id": "id",
}
MAX_DEPTH = 8
MAX_TEXT = 500
_TERM = re.compile(r"^\s*([A-Za-z_]+)((?:\.[^\s=:~]+)*)\s*(=|:|~)\s*(.*?)\s*$", re.DOTALL)
_SEGMENT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Term:
    """One search: ``field`` is ``payload``, ``error``, ``key``, ``tenant``, ``id`` or
    ``text`` (an id or an idempotency key); ``path`` the payload field's segments; ``value``
    what it must equal (payload: a JSON value; the others: text)."""

    field: str
    value: Any
    path: tuple[str, ...] = ()

    def document(self) -> dict[str, Any]:
        """The payload field as a JSON document a payload must contain: ``{"a": {"b": v}}``."""
        doc: Any = self.value
        for segment in reversed(self.path):
            doc = {segment: doc}
        assert isinstance(doc, dict)
        return doc

    def json_path(self) -> str:
        """The SQLite ``json_extract`` path of the payload field: ``$."a"."b"``."""
        return "$" + "".join(f'."{s}"' for s in self.path)

    def text(self) -> str:
        """The term as it reads in the search box (a shareable URL carries this)."""
        if self.field == "payload":
            value = self.value if isinstance(self.value, str) else json.dumps(self.value)
            return f"payload.{'.'.join(self.path)} = {value}"
        if self.field == "text":
            return str(self.value)
        return f"{self.field}: {self.value}"


def parse(query: str) -> Term | None:
    """The term ``query`` asks for, or ``None`` for an empty query."""
    if "\x00" in query:
        raise ValueError("the search holds a NUL character")
    query = query.strip()
    if not query:
        return None
    if len(query) > MAX_TEXT:
        raise ValueError(f"the search is longer than {MAX_TEXT} characters")
    match = _TERM.match(query)
    if match is None or match.group(1).lower() not in FIELDS:
        return Term("text", query)
    name, dotted, op, raw = match.groups()
    field = FIELDS[name.lower()]
    if not raw:
        raise ValueError(f"search {name}{dotted} {op} needs a value after {op!r}")
    if field != "payload":
        if dotted:
            raise ValueError(f"{name} has no fields: search {name}: <text>")
        if field == "id" and not (raw.isdigit() and len(raw) <= 18):
            raise ValueError(f"id must be a task id (digits), not {raw[:40]!r}")
        return Term(field, raw)
    path = tuple(dotted.split(".")[1:])
    if not path:
        raise ValueError("name a payload field: payload.order_id = 17")
    if len(path) > MAX_DEPTH:
        raise ValueError(f"a payload field is at most {MAX_DEPTH} names deep")
    bad = [s for s in path if not _SEGMENT.match(s)]
    if bad:
        raise ValueError(
            f"payload field names are letters, digits, '_' and '-', not {bad[0][:40]!r}"
        )
    if op == "~":
        raise ValueError("a payload field is compared with = (payload.order_id = 17)")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    if isinstance(value, (dict, list)):
        raise ValueError("a payload field is compared with a number, text, true, false or null")
    if isinstance(value, float) and value != value:  # NaN never equals anything
        raise ValueError("a payload value cannot be NaN")
    return Term("payload", value, path)


def json_type(value: Any) -> str:
    """The JSON type a payload field must have to equal ``value``: ``number``, ``text``,
    ``true``, ``false`` or ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "number"
    return "text"
