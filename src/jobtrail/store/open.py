"""``open_driver``: the driver for a database URL. Above both drivers, so that the seam
(``base.py``) never imports an implementation."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .base import Driver, check_pooler


def open_driver(url: str | None = None, **options: Any) -> Driver:
    """The driver for ``url`` (else ``JOBTRAIL_DATABASE_URL``, else ``sqlite:///jobtrail.db``)."""
    url = url or os.environ.get("JOBTRAIL_DATABASE_URL") or "sqlite:///jobtrail.db"
    check_pooler(options.get("pooler"))  # on every backend: a typo is an error, not ignored
    if url.startswith("sqlite:"):
        from .sqlite import SQLiteDriver

        return SQLiteDriver(url, **options)
    if url.startswith(("postgresql:", "postgres:")):
        from .postgres import PostgresDriver

        return PostgresDriver(url, **options)
    scheme = url.split(":", 1)[0] if ":" in url else url
    raise ValueError(
        f"unsupported database URL scheme {scheme!r}: use sqlite:///path.db or "
        "postgresql://user:pass@host:port/db"
    )


def describe_url(url: str) -> str:
    """``url`` as logs may show it: no password (in the user part or a ``password=`` query
    parameter), and a relative SQLite path resolved to the absolute file it opens."""
    if url.startswith("sqlite:"):
        from .sqlite.driver import path_from_url

        try:
            path = path_from_url(url)
        except ValueError:
            return url
        return "sqlite:///" + os.path.abspath(path)  # an absolute path: four slashes
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://(unparsable URL)"
    netloc = parts.netloc
    if parts.password is not None:
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        netloc = f"{parts.username or ''}:***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, "***" if k.lower() in ("password", "passfile") else v) for k, v in pairs],
            safe="*",
        )
    return urlunsplit(parts._replace(netloc=netloc, query=query))
