"""The PostgreSQL driver: ``driver.py`` (the ``Driver`` methods), ``listen.py`` (LISTEN/NOTIFY
wake-ups), ``connection.py`` (the pool, transactions and the watchdog), ``insert.py`` (the
batch insert statement), ``direct.py`` (statements sent without server-side prepare)."""

from .driver import PostgresDriver

__all__ = ["PostgresDriver"]
