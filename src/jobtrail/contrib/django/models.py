"""``Task``: the admin's name for jobtrail's tasks. It has no table of its own (``managed =
False``, never queried): the admin pages read the backend's ``jobtrail.App`` (``admin.py``), so
they show the tasks wherever the backend keeps them. It exists for what the admin needs a model
for: its place on the admin index, and the ``jobtrail.view_task`` permission."""

from __future__ import annotations

from django.db import models


class Task(models.Model):  # type: ignore[misc]
    class Meta:
        managed = False
        app_label = "jobtrail"
        # never read: the admin pages go through jobtrail's App, not the ORM
        db_table = "jobtrail_django_admin_task"
        default_permissions = ("view",)
        verbose_name = "task"
        verbose_name_plural = "tasks"
