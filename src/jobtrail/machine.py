"""Stable import path: the names live in ``jobtrail.model.machine``."""

from .model.machine import *  # noqa: F403
