"""``examples/django_project`` as a user runs it, on SQLite and on PostgreSQL: Django's and
jobtrail's migrations, a POST to the view (order row + task in one ``atomic()``), a burst
worker, then the order page with the task's result, and ``jobtrail explain`` of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Store

EXAMPLE = Path(__file__).parents[2] / "examples" / "django_project"

POST = (
    "import json; from django.test import Client; "
    "r = Client().post('/orders', json.dumps({'item': %r}), content_type='application/json'); "
    "print(json.dumps([r.status_code, r.json()]))"
)
ADMIN = (
    "import json; from django.contrib.auth.models import User; from django.test import Client; "
    "c = Client(); c.force_login(User.objects.create_superuser('admin-%s')); "
    "r = c.get('/admin/jobtrail/task/default/%s/'); "
    "print(json.dumps([r.status_code, r.content.decode()]))"
)
GET = (
    "import json; from django.test import Client; "
    "print(json.dumps(Client().get('/orders/%d').json()))"
)


def run(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE,
        # the project's own settings, whatever another test of the session set up
        env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "example.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def last_json(out: str) -> Any:
    return json.loads(out.strip().splitlines()[-1])


def view_worker_result(store: Store) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """POST an order, run a burst worker, GET the order page: (env, POST body, page)."""
    env = {"EXAMPLE_DATABASE": store.url}
    run(env, "migrate")
    run(env, "jobtrail", "migrate")
    status, body = last_json(run(env, "shell", "-c", POST % "teapot"))
    assert status == 202 and body["status"] == "READY"
    status, bad = last_json(run(env, "shell", "-c", POST % ""))
    assert status == 400  # refused before the atomic block: no order, no task
    assert "processed 1 attempt(s)" in run(env, "jobtrail", "worker", "--burst")
    page = last_json(run(env, "shell", "-c", GET % body["order"]))
    return env, body, page


def test_view_worker_result(store: Store) -> None:
    env, body, page = view_worker_result(store)
    assert page["status"] == "SUCCESSFUL"
    assert page["confirmation"] == f"R-{body['order']:05d}"
    explained = run(env, "jobtrail", "explain", body["task"])
    assert "shop.tasks.confirm_order" in explained and "step   reserve: confirmed" in explained
    # the admin registers jobtrail's task pages: the task, its timeline and its explanation
    status, html = last_json(run(env, "shell", "-c", ADMIN % (body["order"], body["task"])))
    assert status == 200
    assert "shop.tasks.confirm_order" in html and "<td>completed</td>" in html
    assert "step   reserve: confirmed" in html


def test_the_order_page_shows_the_return_value(store: Store) -> None:
    _, body, page = view_worker_result(store)
    confirmation = f"R-{body['order']:05d}"
    assert page["return_value"] == {
        "order": body["order"],
        "confirmation": confirmation,
        "attempt": 1,
    }
