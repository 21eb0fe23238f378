"""One ``jobtrail.App`` per task backend alias and database in a process, shared by every
instance of that backend.

Django makes a new backend instance whenever ``TASKS`` changes (each
``override_settings(TASKS=…)`` of a test suite does); each used to open connections of its own
that nothing closed. Now the instances of one alias on one database share one App, so the
connections a process holds are bounded by its ``TASKS``, whatever the number of instances.

They are closed:

- when Django opens a connection without a database (``_nodb_cursor``: what its test runner
  does to create or drop a test database, and ``manage.py`` commands that create or drop one).
  A PostgreSQL database with sessions open cannot be dropped; Django closes its own first, and
  jobtrail's go then too. A later use opens a new App.
- by ``JobtrailBackend.close()`` (one backend's), ``close_all()``, and at interpreter exit.

Not at ``request_finished``: the App is shared by every thread of the process, and closing it
at the end of one request would fail an enqueue another thread is making; its connections
are a pool, which idles instead (``docs/django.md``)."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...app import App


@dataclass
class Shared:
    """An App and what the backends using it registered on it."""

    app: App
    #: the kinds registered on ``app`` (``App.task`` refuses a second registration)
    registered: set[str] = field(default_factory=set)
    #: the newest backend instance on this App: the one whose signals a task ended outside a
    #: run sends (``App.on_ended_outside_run``)
    backend: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_lock = threading.Lock()
_shared: dict[tuple[str, str, str], Shared] = {}


def shared_app(
    alias: str, url: str, options: dict[str, Any], backend: Any, make: Callable[[], App]
) -> Shared:
    """The Shared App of ``alias`` on ``url`` with ``options`` (made by ``make`` the first
    time); ``backend`` becomes its newest backend."""
    key = (alias, url, repr(sorted(options.items())))  # as close() builds it
    with _lock:
        found = _shared.get(key)
        if found is None:
            found = _shared[key] = Shared(app=make())
        found.backend = backend
        return found


def close(alias: str, url: str, options: dict[str, Any]) -> None:
    """Close the Shared App of ``alias`` on ``url`` with ``options``, if one is open, and
    forget it (a later use makes a new one)."""
    with _lock:
        found = _shared.pop((alias, url, repr(sorted(options.items()))), None)
    if found is not None:
        found.app.close()


def close_all() -> int:
    """Close every App this process's jobtrail backends hold; the number closed."""
    with _lock:
        apps = list(_shared.values())
        _shared.clear()
    for shared in apps:
        shared.app.close()
    return len(apps)


def _on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    from django.db.backends.base.base import NO_DB_ALIAS

    if getattr(connection, "alias", None) == NO_DB_ALIAS:
        close_all()


def connect_signals() -> None:
    """Close the Apps when Django is about to create or drop a database (see above)."""
    from django.db.backends.signals import connection_created

    connection_created.connect(_on_connection_created, dispatch_uid="jobtrail.close_all")


atexit.register(close_all)
