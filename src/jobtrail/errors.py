"""Stable import path: the names live in ``jobtrail.model.errors``."""

from .model.errors import *  # noqa: F403
