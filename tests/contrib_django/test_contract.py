"""What Django's own task tests found (issue 46) and what a Django project meets first (issue
38): the Task a fetched result was enqueued for, arguments normalised as the framework does,
``task_finished`` after ``SystemExit``, the "Unsupported type" of a return value, reading one's
own write inside ``atomic()``, one App per backend alias and database (closed when Django drops
a database), an enqueue that leaves Django's connection alone outside ``atomic()``,
``call_command("jobtrail", VERB, …)``, a missing schema naming ``manage.py``, and each signal
logged once. Each runs on the SQLite backend and the PostgreSQL one."""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from conftest import PG_URL

from .conftest import signals, work


def backends():  # noqa: ANN201 - the framework's objects are untyped
    from jobtrail.contrib.django.compat import task_backends

    return task_backends


def test_a_fetched_result_keeps_the_task_it_was_enqueued_for(alias: str) -> None:
    from django.utils import timezone
    from testapp.tasks import add

    plain = add.using(backend=alias).enqueue(1, 2)
    fetched = add.using(backend=alias).get_result(plain.id)
    assert fetched.task.run_after is None  # was the enqueue time while queued
    assert fetched == plain

    later = timezone.now() + timedelta(days=1)  # never due during the tests
    deferred = add.using(backend=alias, run_after=later).enqueue(3, 4)
    again = add.using(backend=alias).get_result(deferred.id)
    assert again.task.run_after == later and again == deferred


def test_arguments_are_normalised_as_django_does(alias: str) -> None:
    from django.utils import timezone
    from testapp.tasks import add

    backend = backends()[alias]
    task = add.using(backend=alias, run_after=timezone.now() + timedelta(days=1))
    result = task.enqueue((1, 2), b"text", d={1: "one"})
    assert result.args == [[1, 2], "text"]
    assert result.kwargs == {"d": {"1": "one"}}  # as JSON holds it
    assert task.get_result(result.id) == result

    before = backend.app.list(limit=1)
    with pytest.raises(TypeError, match="Unsupported type"):
        task.enqueue(object())
    with pytest.raises(TypeError, match="Unsupported type"):
        task.enqueue(1, when=timezone.now())
    assert backend.app.list(limit=1) == before  # nothing written


def test_a_task_that_raises_system_exit_is_finished(alias: str, django_env: dict[str, str]) -> None:
    from testapp.tasks import exits

    from jobtrail.contrib.django.compat import TaskResultStatus

    result = exits.using(backend=alias).enqueue(3)
    work(alias)
    fetched = exits.using(backend=alias).get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in fetched.errors] == ["builtins.SystemExit"]
    sent = signals(django_env, alias, result.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started", "finished"]
    assert sent[-1]["status"] == "FAILED" and sent[-1]["errors"] == ["builtins.SystemExit"]


def test_a_return_value_json_cannot_hold_says_what_django_says(alias: str) -> None:
    from testapp.tasks import returns_object

    from jobtrail.contrib.django.compat import TaskResultStatus

    result = returns_object.using(backend=alias).enqueue()
    work(alias)
    fetched = returns_object.using(backend=alias).get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    assert fetched.errors[0].exception_class_path == "builtins.TypeError"
    assert "TypeError: Unsupported type: <class 'object'>" in fetched.errors[0].traceback


def test_get_result_inside_atomic_reads_its_own_write(alias: str) -> None:
    from django.db import transaction
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import TaskResultStatus

    with transaction.atomic(using=alias):
        result = add.using(backend=alias).enqueue(5, 6)
        fetched = add.using(backend=alias).get_result(result.id)
        assert fetched == result and fetched.status == TaskResultStatus.READY
    assert add.using(backend=alias).get_result(result.id) == result


def test_an_enqueue_outside_atomic_leaves_djangos_connection_alone(
    alias: str, django_env: dict[str, str]
) -> None:
    """What a ``SimpleTestCase`` needs (Django's connection forbidden there): the enqueue
    commits on jobtrail's own connection and sends ``task_enqueued`` at once."""
    from django.db import connections
    from testapp.tasks import add

    connections[alias].close()
    result = add.using(backend=alias).enqueue(2, 2)
    assert connections[alias].connection is None  # never opened
    assert [s["signal"] for s in signals(django_env, alias, result.id)] == ["enqueued"]


def test_backends_of_one_alias_share_an_app_closed_when_django_drops_a_database(
    django_env: dict[str, str],
) -> None:
    """Every ``override_settings(TASKS=…)`` makes new backend instances: they share the App of
    their alias and database. Django opens a connection without a database to create or drop
    one (its test runner's ``_nodb_cursor``): the Apps are closed then, so a test database
    with jobtrail's sessions can be dropped. (PostgreSQL: SQLite has no such connection.)"""
    from django.conf import settings
    from django.db import connections
    from django.test import override_settings

    first = backends()["pg"]
    app = first.app
    with override_settings(TASKS=dict(settings.TASKS)):
        second = backends()["pg"]
        assert second is not first and second.app is app
    with connections["pg"]._nodb_cursor():
        pass
    assert backends()["pg"].app is not app


def test_call_command_runs_a_verb_as_manage_py_does(alias: str) -> None:
    from django.core.management import CommandError, call_command
    from testapp.tasks import add

    out = io.StringIO()
    call_command("jobtrail", "migrate", backend=alias, stdout=out)
    assert "up to date" in out.getvalue()
    result = add.using(backend=alias).enqueue(1, 2)
    out = io.StringIO()
    call_command("jobtrail", "status", result.id, "--backend", alias, stdout=out)
    assert "queued" in out.getvalue()
    err = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("jobtrail", "status", "987654321", backend=alias, stdout=out, stderr=err)
    assert failed.value.returncode != 0 and "987654321" in err.getvalue()
    # the calls leave the process's environment as they found it: a later jobtrail command
    # of the same process (a test suite's) must not find the Django App named in it
    assert "JOBTRAIL_APP" not in os.environ


@pytest.fixture
def empty_store(alias: str, tmp_path: object) -> Iterator[str]:
    """A database URL without jobtrail's schema, on the alias's kind of database."""
    if alias == "default":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    schema = "dj_empty_" + secrets.token_hex(6)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield PG_URL + ("&" if "?" in PG_URL else "?") + f"options=-c%20search_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_missing_schema_names_manage_py_migrate(empty_store: str) -> None:
    from django.conf import settings
    from django.core.management import CommandError, call_command
    from django.test import override_settings
    from testapp.tasks import add

    from jobtrail import SchemaMissing

    fresh = {"BACKEND": "jobtrail.contrib.django.JobtrailBackend"}
    named = "python manage.py jobtrail migrate --backend fresh"
    options = {"DATABASE_URL": empty_store}
    with override_settings(TASKS={**settings.TASKS, "fresh": {**fresh, "OPTIONS": options}}):
        try:
            with pytest.raises(SchemaMissing, match=named):
                add.using(backend="fresh").enqueue(1, 2)
            with pytest.raises(CommandError, match=named):
                call_command("jobtrail", "list", backend="fresh", stdout=io.StringIO())
            call_command("jobtrail", "migrate", backend="fresh", stdout=io.StringIO())
            result = add.using(backend="fresh").enqueue(1, 2)
            assert add.using(backend="fresh").get_result(result.id) == result
        finally:
            backends()["fresh"].close()


def test_manage_py_names_migrate_in_one_line(empty_store: str) -> None:
    """``manage.py jobtrail VERB`` on a store without the schema: one line naming the
    command, exit status 1 (it was a traceback)."""
    from .conftest import manage

    done = manage(
        "jobtrail", "list", "--backend", "fresh", env={"JT_DJ_FRESH_URL": empty_store}, check=False
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("CommandError: ") and last.endswith(
        "run `python manage.py jobtrail migrate --backend fresh` first"
    )


def test_each_signal_is_logged_once(alias: str) -> None:
    """With ``DEBUG`` on, Django's console handler writes ``django.tasks`` records; the
    worker's own handler used to write each again."""
    from testapp.tasks import add

    result = add.using(backend=alias).enqueue(3, 4)
    done = work(alias, env={"JT_DJ_DEBUG": "1"})
    lines = [line for line in done.stderr.splitlines() if f"Task id={result.id} " in line]
    assert len(lines) == 2, done.stderr  # RUNNING, SUCCESSFUL
    assert "state=RUNNING" in lines[0] and "state=SUCCESSFUL" in lines[1]
