"""The options of ``enqueue``, defined once. ``App.enqueue``/``aenqueue``, the task handle's
``enqueue``/``aenqueue``/``enqueue_many`` (``**options: Unpack[EnqueueOptions]``), the keys of
an ``enqueue_many`` item, and the checks of the HTTP body and the CLI's options
(tests/unit/test_enqueue_options.py) all read this module, so a new option is added here and
mypy then checks every caller against it.

``DEFAULTS`` says what an option left out means; ``AppCore._new_task`` reads a missing key as
that default (tested). ``connection=`` is not an option of the task but of the call (the
caller's transaction), so each method keeps it as its own keyword."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, TypedDict, TypeVar


class EnqueueOptions(TypedDict, total=False):
    """What ``enqueue(kind, payload, **options)`` takes besides the kind and the payload."""

    #: at most 255 characters, unique per (tenant, kind): a repeat returns the existing task
    idempotency_key: str | None
    #: at most 255 characters
    tenant: str
    #: None: the kind's queue
    queue: str | None
    #: higher runs first within a queue
    priority: int
    #: an aware datetime, or ISO 8601 (UTC without an offset); None: now
    run_at: datetime | str | None
    #: seconds from now (a ``timedelta`` is taken too), up to 10 years
    delay: float | None
    #: None: the kind's
    max_attempts: int | None
    #: a parent task id (workflows)
    parent: str | None
    #: fold enqueues together: while the task of (tenant, kind, key) is queued and unclaimed,
    #: an enqueue with the key replaces its payload and moves its run time (needs ``debounce``)
    debounce_key: str | None
    #: seconds (or a ``timedelta``) to wait for another enqueue with the key
    debounce: float | None
    #: the longest the first enqueue's task is put off (None: no bound); at least ``debounce``
    debounce_max: float | None
    #: the idempotency key is the task's for this many seconds after it was created
    unique_for: float | None
    #: ``"active"``: the idempotency key is the task's until it has ended
    unique_while: str | None
    #: seconds: a task still queued then is cancelled (``expired``), never run
    expires_in: float | None
    #: an aware datetime or ISO 8601 with an offset: as ``expires_in``
    expires_at: datetime | str | None
    #: False: the commit returns before it reaches the disk (PostgreSQL ``synchronous_commit``
    #: off for that transaction; on SQLite nothing changes): a server crash may lose the last
    #: moments' enqueues whole, never tear one nor run one twice (docs/guide.md)
    wait_for_disk: bool


#: The value of each option left out (the same as passing it).
DEFAULTS: Final[EnqueueOptions] = {
    "idempotency_key": None,
    "tenant": "",
    "queue": None,
    "priority": 0,
    "run_at": None,
    "delay": None,
    "max_attempts": None,
    "parent": None,
    "debounce_key": None,
    "debounce": None,
    "debounce_max": None,
    "unique_for": None,
    "unique_while": None,
    "expires_in": None,
    "expires_at": None,
    "wait_for_disk": True,
}

#: The option names, in their order of definition.
NAMES: Final[tuple[str, ...]] = tuple(EnqueueOptions.__annotations__)

_NAMES: Final[frozenset[str]] = frozenset(NAMES)

#: The keys an ``enqueue_many`` item may hold.
ITEM_KEYS: Final[frozenset[str]] = frozenset({"kind", "payload", *NAMES})


def refuse_unknown(options: Mapping[str, object], where: str) -> None:
    """Refuse a keyword that is no option, as Python refuses one a signature lacks (a
    ``TypeError`` naming the first such keyword)."""
    if not _NAMES.issuperset(options):
        name = next(key for key in options if key not in _NAMES)
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")


F = TypeVar("F", bound=Callable[..., Any])


def spelled_out(fn: F) -> F:
    """``fn`` whose ``**options`` shows as the named keywords with their defaults to
    ``inspect.signature`` (``help()``, IPython, Jupyter and docs tools); type checkers and IDEs
    read the ``Unpack[EnqueueOptions]`` annotation itself. Binding is the same: keyword-only."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    at = next(
        (i for i, p in enumerate(params) if p.kind is p.KEYWORD_ONLY),
        len(params),
    )
    defaults: Mapping[str, object] = DEFAULTS
    named = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=defaults[name],
            # a TypedDict keeps its annotations as ForwardRefs: shown as their text
            annotation=getattr(hint, "__forward_arg__", hint),
        )
        for name, hint in EnqueueOptions.__annotations__.items()
    ]
    fn.__signature__ = sig.replace(parameters=params[:at] + named + params[at:])  # type: ignore[attr-defined]
    return fn
