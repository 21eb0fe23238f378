"""The Django app ``jobtrail.contrib.django``: gives ``manage.py jobtrail``."""

from __future__ import annotations

from django.apps import AppConfig


class JobtrailConfig(AppConfig):  # type: ignore[misc]
    name = "jobtrail.contrib.django"
    label = "jobtrail"
    verbose_name = "jobtrail"
