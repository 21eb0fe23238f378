"""The App that ``manage.py jobtrail`` hands the jobtrail CLI (as ``--app`` /
``JOBTRAIL_APP=jobtrail.contrib.django.runtime:app``); set by the command before the CLI runs."""

from __future__ import annotations

from ...app import App

app: App | None = None
