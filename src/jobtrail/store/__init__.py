"""The store: one driver seam (``base.Driver``) with a SQLite and a PostgreSQL driver."""

from .base import Claim, Driver, Move, NewTask
from .open import open_driver

__all__ = ["Claim", "Driver", "Move", "NewTask", "open_driver"]
