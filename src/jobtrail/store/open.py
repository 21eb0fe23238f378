"""``open_driver``: the driver for a database URL. Above both drivers, so that the seam
(``base.py``) never imports an implementation."""

from __future__ import annotations

import os
from typing import Any

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
