"""The backend's settings: the plain worker's queues, DATABASE_URL (tables elsewhere: an enqueue
commits on its own), the URL made of a Django database, and refusals that name what is wrong."""

from __future__ import annotations

import pytest

from .conftest import work


def test_plain_worker_serves_the_backends_queues(alias: str) -> None:
    """Without --queues the worker serves QUEUES, also a queue no task names by default."""
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import SUCCESSFUL

    task = add.using(backend=alias, queue_name="spare")
    result = task.enqueue(20, 22)
    work(alias)
    assert task.get_result(result.id).status == SUCCESSFUL


def test_database_url_enqueue_commits_on_its_own(django_env: dict[str, str]) -> None:
    from django.db import transaction
    from testapp.models import Note
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import TaskResultStatus, task_backends

    backend = task_backends["separate"]
    assert not backend.in_django_database
    assert backend.app.url.endswith(".separate")
    task = add.using(backend="separate")
    with pytest.raises(RuntimeError), transaction.atomic():
        Note.objects.create(text="gone")
        result = task.enqueue(1, 2)
        raise RuntimeError("rolled back")
    # the row is gone, the task is not: it was committed in jobtrail's own database
    assert not Note.objects.filter(text="gone").exists()
    assert task.get_result(result.id).status == TaskResultStatus.READY
    work("separate")


def test_database_url_of_django_databases() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from jobtrail.contrib.django.settings import database_url, url_of_database

    pg = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "shop",
        "USER": "app",
        "PASSWORD": "p@ss/word",
        "HOST": "db.internal",
        "PORT": 6432,
        "OPTIONS": {"sslmode": "require", "server_side_binding": True},
    }
    mem = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    other = {"ENGINE": "django.db.backends.mysql", "NAME": "x"}
    assert url_of_database("pg", pg) == (
        "postgresql://app:p%40ss%2Fword@db.internal:6432/shop?sslmode=require"
    )
    with pytest.raises(ImproperlyConfigured, match="in-memory SQLite"):
        url_of_database("mem", mem)
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        url_of_database("other", other)
    with pytest.raises(ImproperlyConfigured, match="'nowhere', which is not in DATABASES"):
        database_url("nowhere")
    assert database_url("default").startswith("sqlite:///")


def test_unknown_options_are_refused(django_env: dict[str, str]) -> None:
    from jobtrail.contrib.django import JobtrailBackend
    from jobtrail.contrib.django.compat import InvalidTask

    with pytest.raises(InvalidTask, match="unknown keys \\['DATABSE'\\]"):
        JobtrailBackend("x", {"OPTIONS": {"DATABSE": "default"}})
    backend = JobtrailBackend("x", {"OPTIONS": {"TASKS": {"testapp.tasks.add": {"retries": 3}}}})
    from testapp.tasks import add

    with pytest.raises(ValueError, match="unknown jobtrail settings \\['retries'\\]"):
        backend.validate_task(add)


def test_a_task_of_another_kind_is_not_a_django_result(alias: str) -> None:
    from jobtrail.contrib.django.compat import TaskResultDoesNotExist, task_backends

    backend = task_backends[alias]
    if "plain.kind" not in backend.app.kinds:
        backend.app.task("plain.kind", queue="elsewhere")(lambda ctx, payload: None)
    stored = backend.app.enqueue("plain.kind", None)
    with pytest.raises(TaskResultDoesNotExist, match="not an importable Django task"):
        backend.get_result(stored.id)
    backend.app.cancel(stored.id, by="test", note="not a Django task")
