"""The statement that inserts a batch of tasks on PostgreSQL (``task_insert_uniform`` when the
tasks differ only in their payloads, else ``task_insert_many``), and the array literals the
batched statements take."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from ..base import NewTask, dumps


def insert_statement(
    news: Sequence[NewTask], encode_time: Callable[[datetime], datetime]
) -> tuple[str, dict[str, Any]]:
    """The name of the statement inserting ``news`` and its parameters:
    ``task_insert_uniform`` when they differ only in their payloads, else
    ``task_insert_many`` (a JSON row each)."""
    first = news[0]  # no keys or parents, one actor and data (transition.create_batches)
    shared = _shared(first)
    if all(_shared(n) == shared for n in news):
        return "task_insert_uniform", {
            "payloads": quoted_array(n.payload_json for n in news),
            "hashes": quoted_array(n.payload_hash for n in news),
            "kind": first.kind,
            "queue": first.queue,
            "tenant": first.tenant,
            "state": first.state.value,
            "priority": first.priority,
            "max_attempts": first.max_attempts,
            "lease_seconds": first.lease_seconds,
            "reentrant": first.reentrant,
            "run_at": None if first.run_at is None else encode_time(first.run_at),
            "delay": first.delay,
            "actor": first.actor,
            "data": dumps(first.data),
        }
    return "task_insert_many", {
        "rows": dumps(
            [
                [
                    n.kind,
                    n.queue,
                    n.tenant,
                    n.state.value,
                    n.payload_json,
                    n.payload_hash,
                    n.priority,
                    n.max_attempts,
                    n.lease_seconds,
                    n.reentrant,
                    None if n.run_at is None else encode_time(n.run_at).isoformat(),
                    n.delay,
                ]
                for n in news
            ]
        ),
        "actor": first.actor,
        "data": dumps(first.data),
    }


def int_array(values: Iterable[int]) -> str:
    """An array literal (``{1,2}``, cast in the query): psycopg dumps Python lists element by
    element in Python, which costs more than the statement on the hot path."""
    return "{" + ",".join(str(int(v)) for v in values) + "}"


@lru_cache(maxsize=64)
def text_array(values: tuple[str, ...]) -> str:
    """``_quoted_array``, cached (worker kinds: the same on each call)."""
    return quoted_array(values)


def quoted_array(values: Iterable[str]) -> str:
    """A text array literal with every element quoted (backslashes and quotes escaped)."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}"


def _shared(new: NewTask) -> tuple[Any, ...]:
    """What ``task_insert_uniform`` takes once for a batch: all but the payload and its hash."""
    return (
        new.kind,
        new.queue,
        new.tenant,
        new.state,
        new.priority,
        new.max_attempts,
        new.lease_seconds,
        new.reentrant,
        new.run_at,
        new.delay,
    )
