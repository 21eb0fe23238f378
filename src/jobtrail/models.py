"""Stable import path: the names live in ``jobtrail.model.models``."""

from .model.models import *  # noqa: F403
