"""What the backend reads from Django's settings: the jobtrail URL of a Django database, and the
jobtrail kind settings of a task (``OPTIONS["TASKS"][path]``, or ``@jobtrail_options`` on the
task function)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

F = TypeVar("F", bound=Callable[..., Any])

#: The jobtrail kind settings a Django task may set (``App.task``'s keyword arguments).
KIND_SETTINGS = frozenset(
    {
        "max_attempts",
        "lease_seconds",
        "reentrant",
        "backoff_base",
        "backoff_cap",
        "max_elapsed",
        "retry_unclassified",
        "timeout",
    }
)

#: Django's own keys in a PostgreSQL database's OPTIONS, not libpq parameters.
_DJANGO_PG_OPTIONS = frozenset(
    {"isolation_level", "server_side_binding", "pool", "assume_role", "cursor_factory"}
)


def jobtrail_options(**settings: Any) -> Callable[[F], F]:
    """Set jobtrail kind settings on a task function (put it under ``@task``)::

    @task
    @jobtrail_options(max_attempts=3, lease_seconds=60)
    def send_email(to): ...
    """
    check_settings("jobtrail_options", settings)

    def mark(fn: F) -> F:
        fn.__jobtrail_options__ = dict(settings)  # type: ignore[attr-defined]
        return fn

    return mark


def check_settings(where: str, settings: Any) -> None:
    if not isinstance(settings, dict):
        raise TypeError(f"{where} must be a dict of jobtrail kind settings")
    unknown = set(settings) - KIND_SETTINGS
    if unknown:
        raise ValueError(
            f"{where} has unknown jobtrail settings {sorted(unknown)}; "
            f"known: {sorted(KIND_SETTINGS)}"
        )


def kind_settings(path: str, func: Any, per_path: dict[str, Any]) -> dict[str, Any]:
    """The kind settings of task ``path``: the function's ``@jobtrail_options`` overlaid by
    ``OPTIONS["TASKS"][path]`` (settings win, so operations can tune without a deploy)."""
    merged: dict[str, Any] = dict(getattr(func, "__jobtrail_options__", {}))
    configured = per_path.get(path, {})
    check_settings(f"OPTIONS['TASKS'][{path!r}]", configured)
    merged.update(configured)
    return merged


def database_url(alias: str) -> str:
    """The jobtrail URL of Django database ``alias`` (SQLite file or PostgreSQL)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    databases = settings.DATABASES
    if alias not in databases:
        raise ImproperlyConfigured(
            f"jobtrail: OPTIONS['DATABASE'] is {alias!r}, which is not in DATABASES "
            f"({', '.join(sorted(databases))})"
        )
    return url_of_database(alias, databases[alias])


def url_of_database(alias: str, db: dict[str, Any]) -> str:
    """The jobtrail URL of one ``DATABASES`` entry (``alias`` names it in errors)."""
    from django.core.exceptions import ImproperlyConfigured

    engine = db.get("ENGINE", "")
    name = str(db.get("NAME") or "")
    if engine.endswith("sqlite3"):
        if not name or name == ":memory:" or name.startswith("file:"):
            raise ImproperlyConfigured(
                f"jobtrail: Django database {alias!r} is an in-memory SQLite database; the "
                "worker runs in another process, so jobtrail needs a file (set NAME to a path)"
            )
        return f"sqlite:///{name}"
    if "postgresql" in engine:
        user = quote(str(db.get("USER") or ""), safe="")
        password = quote(str(db.get("PASSWORD") or ""), safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = str(db.get("HOST") or "")
        host = quote(host, safe="") if host.startswith("/") else host
        port = f":{db['PORT']}" if db.get("PORT") else ""
        params = [
            f"{quote(str(k), safe='')}={quote(str(v), safe='')}"
            for k, v in sorted((db.get("OPTIONS") or {}).items())
            if k not in _DJANGO_PG_OPTIONS
        ]
        query = "?" + "&".join(params) if params else ""
        return f"postgresql://{auth}{host}{port}/{quote(name, safe='')}{query}"
    raise ImproperlyConfigured(
        f"jobtrail: Django database {alias!r} uses {engine!r}; jobtrail keeps its tables in "
        "SQLite or PostgreSQL (psycopg 3) databases. Set OPTIONS['DATABASE_URL'] to keep them "
        "elsewhere."
    )
