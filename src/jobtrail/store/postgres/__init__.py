"""The PostgreSQL driver: ``driver.py`` (the ``Driver`` methods), ``connection.py`` (the pool,
transactions and the watchdog), ``direct.py`` (statements sent without server-side prepare)."""

from .driver import PostgresDriver

__all__ = ["PostgresDriver"]
