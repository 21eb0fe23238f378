"""The SQLite driver (``driver.py``): the fast test database and a single-host store."""

from .driver import SQLiteDriver, path_from_url

__all__ = ["SQLiteDriver", "path_from_url"]
