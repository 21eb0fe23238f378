"""What the App knows about a task kind: its handler and its policy (§13 ``@app.task``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .machine import ErrorCategory

Classifier = Callable[[BaseException], "ErrorCategory | str | None"]

#: Largest accepted payload once serialised (§14), in bytes.
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
        if self.max_attempts < 1:
            raise ValueError(f"kind {self.name!r}: max_attempts must be at least 1")
        if not self.lease_seconds > 0:
            raise ValueError(f"kind {self.name!r}: lease_seconds must be positive")
        if self.backoff_base < 0 or self.backoff_cap < 0:
            raise ValueError(f"kind {self.name!r}: backoff_base and backoff_cap must be >= 0")
        if self.max_elapsed is not None and not self.max_elapsed > 0:
            raise ValueError(f"kind {self.name!r}: max_elapsed must be positive")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"kind {self.name!r}: timeout must be positive")
