"""What the App knows about a task kind: its handler and its policy (``@app.task``'s options)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import validate
from .machine import ErrorCategory

Classifier = Callable[[BaseException], "ErrorCategory | str | None"]

#: Largest accepted payload once serialised, in bytes (a larger one is refused).
DEFAULT_MAX_PAYLOAD = 1024 * 1024


@dataclass(frozen=True)
class KindSpec:
    name: str
    handler: Callable[..., Any] | None
    queue: str
    reentrant: bool = True
    max_attempts: int = 5
    lease_seconds: float = 30.0
    backoff_base: float = 1.0
    backoff_cap: float = 300.0
    max_elapsed: float | None = None
    retry_unclassified: bool = True
    classify: Classifier | None = None
    reconcile: Callable[[str], Any] | None = None
    check_receipt: Callable[[str], Any] | None = None
    timeout: float | None = None
    #: The dataclass or pydantic model of the handler's payload parameter (``core/typed.py``):
    #: ``enqueue`` checks and stores it as JSON, the handler gets it rebuilt.
    payload_type: type | None = None
    #: ``@app.task(unique_for=..., unique_while=...)``: the window of an idempotency key given
    #: to an enqueue of this kind that names none of its own (None/False: unique for ever)
    unique_for: float | None = None
    unique_active: bool = False
    #: serial per key: how many tasks of one concurrency key may be leased at once (None: 1)
    concurrency_per_key: int | None = None

    #: ``async def`` handler (run on the worker's event loop); worked out once.
    is_async: bool = field(init=False, compare=False)

    def __post_init__(self) -> None:
        is_async = self.handler is not None and inspect.iscoroutinefunction(self.handler)
        object.__setattr__(self, "is_async", is_async)

    def validate(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError("a task kind needs a non-empty name")
        if "\x00" in self.name:  # PostgreSQL text cannot hold it: refused on every backend
            raise ValueError(f"kind {self.name!r}: the name contains a NUL character")
        # in range before the kind is registered (an attempt count PostgreSQL's INTEGER cannot
        # hold failed only at the first enqueue, a lease of 1e300 s at every claim), in the
        # first release's wording with the bound
        most, count = validate.MAX_ATTEMPTS, self.max_attempts
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= most:
            raise ValueError(
                f"kind {self.name!r}: max_attempts must be at least 1 (an integer, at most {most})"
            )
        for name, value, positive in (
            ("lease_seconds", self.lease_seconds, True),
            ("backoff_base", self.backoff_base, False),
            ("backoff_cap", self.backoff_cap, False),
            ("max_elapsed", self.max_elapsed, True),
            ("timeout", self.timeout, True),
        ):
            if value is None and name in ("max_elapsed", "timeout"):
                continue
            try:
                validate.seconds(value, name, positive=positive)
            except ValueError:
                floor = "positive" if positive else ">= 0"
                raise ValueError(
                    f"kind {self.name!r}: {name} must be {floor}, at most 100 years (36525d)"
                ) from None
        validate.concurrency_per_key(self.concurrency_per_key, self.name)
