"""jobtrail as a backend of Django's task framework (docs/django.md): ``django.tasks`` in
Django >= 6.0, or the ``django-tasks`` backport on Django 5.2.

``TASKS = {"default": {"BACKEND": "jobtrail.contrib.django.JobtrailBackend"}}``, and
``"jobtrail.contrib.django"`` in ``INSTALLED_APPS`` for ``manage.py jobtrail …``. See
docs/django.md. Names load lazily, so listing the app never imports the framework early."""

from __future__ import annotations

from typing import Any

__all__ = ["JobtrailBackend", "JobtrailTaskContext", "jobtrail_options"]


def __getattr__(name: str) -> Any:
    try:
        import django  # noqa: F401
    except ImportError:
        raise ImportError(
            f"jobtrail.contrib.django.{name} needs Django: pip install 'jobtrail[django]'"
        ) from None
    if name == "JobtrailBackend":
        from .backend import JobtrailBackend

        return JobtrailBackend
    if name == "JobtrailTaskContext":
        from .runner import JobtrailTaskContext

        return JobtrailTaskContext
    if name == "jobtrail_options":
        from .settings import jobtrail_options

        return jobtrail_options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
