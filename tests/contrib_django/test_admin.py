"""The read-only admin pages of jobtrail's tasks (``jobtrail.contrib.django.admin``) through
Django's test client: the list with its state and queue filters, a task's page (fields,
timeline, explanation), escaping of user data, and who is let in. On the SQLite backend and the
PostgreSQL one, and on backends whose tables are elsewhere (``OPTIONS["DATABASE_URL"]``)."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from django.utils.html import escape

from .conftest import work

LIST = "/admin/jobtrail/task/"
HOSTILE = "<script>alert('x')</script>"


def page(alias: str, task_id: str) -> str:
    return f"{LIST}{alias}/{task_id}/"


def client_for(kind: str) -> Any:
    """A test client logged in as a fresh user: ``viewer`` (staff with jobtrail.view_task),
    ``superuser``, ``staff`` (no permission) or ``plain`` (not staff)."""
    from django.contrib.auth.models import Permission, User
    from django.test import Client

    name = f"{kind}-{secrets.token_hex(4)}"
    if kind == "superuser":
        user = User.objects.create_superuser(name, password="x")
    else:
        user = User.objects.create_user(name, password="x", is_staff=kind != "plain")
    if kind == "viewer":
        user.user_permissions.add(Permission.objects.get(codename="view_task"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer(django_env: dict[str, str]) -> Any:
    return client_for("viewer")


def backends():  # noqa: ANN201 - the framework's objects are untyped
    from jobtrail.contrib.django.compat import task_backends

    return task_backends


def test_the_list_filters_by_state_and_queue(alias: str, viewer: Any) -> None:
    from testapp.tasks import add, record

    queued = add.using(backend=alias).enqueue(1, 2)
    done = record.using(backend=alias).enqueue("listed")
    work(alias, "--queues", "other")
    everything = viewer.get(LIST, {"backend": alias})
    assert everything.status_code == 200
    text = everything.content.decode()
    assert page(alias, queued.id) in text and page(alias, done.id) in text
    assert "testapp.tasks.add" in text and "testapp.tasks.record" in text

    succeeded = viewer.get(LIST, {"backend": alias, "state": "succeeded", "queue": "other"})
    text = succeeded.content.decode()
    assert page(alias, done.id) in text and page(alias, queued.id) not in text
    waiting = viewer.get(LIST, {"backend": alias, "state": "queued"}).content.decode()
    assert page(alias, queued.id) in waiting and page(alias, done.id) not in waiting
    other = viewer.get(LIST, {"backend": alias, "queue": "default"}).content.decode()
    assert page(alias, queued.id) in other and page(alias, done.id) not in other


@pytest.mark.parametrize("where", ["django", "separate"])
def test_a_task_page_has_fields_timeline_and_explanation(
    where: str, alias: str, viewer: Any
) -> None:
    from testapp.tasks import fail

    # the same pages for tasks kept outside Django's database (OPTIONS["DATABASE_URL"])
    target = alias if where == "django" else {"default": "separate", "pg": "separate_pg"}[alias]
    result = fail.using(backend=target).enqueue(HOSTILE)
    work(target)
    response = viewer.get(page(target, result.id))
    assert response.status_code == 200
    text = response.content.decode()
    app = backends()[target].app
    task = app.get(result.id)
    assert task.state.value == "dead"
    assert "testapp.tasks.fail" in text and "dead" in text and "2/2" in text
    # the timeline: every transition, with its reason, actor and attempt
    log = app.transitions(result.id)
    assert [t.reason for t in log] == [
        "enqueued",
        "claimed",
        "retry_scheduled",
        "claimed",
        "attempts_exhausted",
    ]
    for t in log:
        assert f"<td>{escape(t.reason)}</td>" in text
        assert f"<td>{escape(t.actor)}</td>" in text
    assert text.count("<td>builtins.KeyError: ") == 2
    assert text.count('<pre class="jobtrail-traceback">') == 2
    assert escape("raise KeyError(message)") in text
    # jobtrail's own explanation, as `jobtrail explain` prints it
    assert escape(app.explain(result.id)) in text


def test_user_data_is_escaped(alias: str, viewer: Any) -> None:
    from testapp.tasks import fail

    result = fail.using(backend=alias).enqueue(HOSTILE)
    work(alias)
    text = viewer.get(page(alias, result.id)).content.decode()
    assert HOSTILE not in text
    assert escape(HOSTILE) in text or escape('"' + HOSTILE + '"') in text
    assert "&lt;script&gt;" in text  # the payload, the error and the explanation


def test_who_is_let_in(alias: str, django_env: dict[str, str]) -> None:
    from django.test import Client
    from testapp.tasks import add

    result = add.using(backend=alias).enqueue(3, 4)
    urls = [f"{LIST}?backend={alias}", page(alias, result.id)]
    for url in urls:
        # anonymous and non-staff users: sent to the admin's login page
        for client in (Client(), client_for("plain")):
            response = client.get(url)
            assert response.status_code == 302 and "/admin/login/" in response["Location"]
        # staff without jobtrail.view_task: refused
        assert client_for("staff").get(url).status_code == 403
        # the permission, or a superuser: let in
        assert client_for("viewer").get(url).status_code == 200
        assert client_for("superuser").get(url).status_code == 200


def test_read_only(alias: str, viewer: Any) -> None:
    from testapp.tasks import add

    result = add.using(backend=alias).enqueue(5, 6)
    before = backends()[alias].app.transitions(result.id)
    index = viewer.get("/admin/").content.decode()
    assert f'href="{LIST}"' in index  # listed on the admin index, as a model
    assert "/admin/jobtrail/task/add/" not in index
    for url in (
        f"{LIST}add/",
        f"{page(alias, result.id)}delete/",
        f"{page(alias, result.id)}change/",
    ):
        assert viewer.get(url).status_code == 404
    refused = viewer.post(page(alias, result.id), {"state": "cancelled"})
    assert refused.status_code == 405
    assert viewer.post(LIST, {"action": "delete_selected"}).status_code == 405
    assert backends()[alias].app.transitions(result.id) == before


def test_bad_input_is_named(alias: str, viewer: Any) -> None:
    bad = viewer.get(LIST, {"backend": alias, "state": "sleeping"})
    assert bad.status_code == 400 and "unknown state &#x27;sleeping&#x27;" in bad.content.decode()
    assert viewer.get(LIST, {"backend": "nowhere"}).status_code == 404
    assert viewer.get(page(alias, "999999999")).status_code == 404
    assert viewer.get(page(alias, "not-an-id")).status_code == 404
    assert viewer.get(page("nowhere", "1")).status_code == 404
