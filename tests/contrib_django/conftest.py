"""The Django project under ``project/`` set up once per session on both databases: a SQLite
file (task backend ``"default"``) and a fresh PostgreSQL schema (task backend ``"pg"``). Django
and the task framework come from whichever is installed: the ``django-tasks`` backport on
Django 5.2 (the main venv) or ``django.tasks`` (Django >= 6.0, the Python 3.12 venv)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import PG_URL, require_pg
from psycopg.conninfo import conninfo_to_dict

PROJECT = Path(__file__).parent / "project"

ALIASES = ["default", "pg"]  # the SQLite backend and the PostgreSQL one
#: backends with OPTIONS["DATABASE_URL"]: jobtrail's tables outside Django's databases
SEPARATE = ["separate", "separate_pg"]


@pytest.fixture(scope="session")
def django_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require_pg()
    tmp = tmp_path_factory.mktemp("django")
    schema = "dj_" + secrets.token_hex(6)
    separate = schema + "_own"  # the PostgreSQL store of the "separate_pg" backend
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE SCHEMA "{separate}"')
    info = conninfo_to_dict(PG_URL)
    env = {
        "JT_DJ_SQLITE": str(tmp / "django.db"),
        "JT_DJ_PG_NAME": str(info.get("dbname", "test")),
        "JT_DJ_PG_USER": str(info.get("user", "postgres")),
        "JT_DJ_PG_HOST": str(info.get("host", "127.0.0.1")),
        "JT_DJ_PG_PORT": str(info.get("port", "5432")),
        "JT_DJ_PG_SCHEMA": schema,
        "JT_DJ_PG_SEPARATE_URL": PG_URL
        + ("&" if "?" in PG_URL else "?")
        + f"options=-c%20search_path%3D{separate}",
        "JT_DJ_SIGNALS": str(tmp / "signals.jsonl"),
        "JT_DJ_RECORD": str(tmp / "record.txt"),
        "DJANGO_SETTINGS_MODULE": "jt_django_settings",
    }
    os.environ.update(env)
    sys.path.insert(0, str(PROJECT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections
    from testapp.models import Note

    # Django's own tables (auth, sessions, admin: the admin tests log in) and the test app's
    # in the SQLite database; only the test app's table in the PostgreSQL one
    call_command("migrate", database="default", run_syncdb=True, verbosity=0)
    with connections["pg"].schema_editor() as editor:
        editor.create_model(Note)
    for alias in [*ALIASES, *SEPARATE]:
        migrate(alias)
    try:
        yield env
    finally:
        from jobtrail.contrib.django.compat import task_backends

        for alias in [*ALIASES, *SEPARATE]:
            task_backends[alias].close()
        connections.close_all()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{separate}" CASCADE')


def migrate(alias: str) -> None:
    """``manage.py jobtrail migrate`` for the backend, as a user runs it."""
    manage("jobtrail", "migrate", "--backend", alias)


def manage(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` in its own process (``env`` added to this one's); fails the
    test on a non-zero exit unless ``check`` is false."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": str(PROJECT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


def work(
    alias: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A burst worker of the backend in its own process (one task at a time)."""
    return manage(
        "jobtrail", "worker", "--burst", "--backend", alias, "--concurrency", "1", *extra, env=env
    )


@pytest.fixture(params=ALIASES)
def alias(request: pytest.FixtureRequest, django_env: dict[str, str]) -> str:
    return str(request.param)


def signals(env: dict[str, str], alias: str, task_id: str) -> list[dict[str, Any]]:
    path = Path(env["JT_DJ_SIGNALS"])
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line["id"] == task_id and line["backend"] == alias]
