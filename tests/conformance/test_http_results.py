"""Results over HTTP on both backends: ``GET /api/tasks/{id}`` carries ``result``, the
transitions carry ``traceback`` and ``error_class``, and ``GET /api/tasks/{id}/result``
answers 200 / 202 / 409 / 404 / 422 in the one error shape."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

import jobtrail

from ._http_support import auth, client, register
from .support import drain, run

ADM, RD, TA = auth("adm"), auth("rd"), auth("ta")


@pytest.fixture
def web(app: jobtrail.App) -> TestClient:
    return client(register(app))


def test_the_task_and_its_result_after_success(web: TestClient, app: jobtrail.App) -> None:
    task_id = app.enqueue("send", {"to": "ops", "n": [1, 2]}).id
    drain(app, task_id)
    task = web.get(f"/api/tasks/{task_id}", headers=RD).json()
    assert task["result"] == {"to": "ops", "n": [1, 2]}
    r = web.get(f"/api/tasks/{task_id}/result", headers=RD)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "task_id": task_id,
        "state": "succeeded",
        "finished": True,
        "result": {"to": "ops", "n": [1, 2]},
        "poll_after": 0,
    }


def test_a_dead_task_answers_409_with_its_reason(web: TestClient, app: jobtrail.App) -> None:
    task_id = app.enqueue("fail").id
    drain(app, task_id)
    r = web.get(f"/api/tasks/{task_id}/result?timeout=1", headers=RD)
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["task_id"] == task_id and body["current_state"] == "dead"
    assert (body["reason"], body["category"]) == ("permanent_error", "invalid_input")
    assert f"task {task_id} ended dead" in body["error"]
    # the failed attempt's transition carries its traceback and class
    last = web.get(f"/api/tasks/{task_id}/transitions", headers=RD).json()[-1]
    assert last["error_class"] == "jobtrail.model.errors.PermanentError"
    assert "PermanentError: no" in last["traceback"]
    first = web.get(f"/api/tasks/{task_id}/transitions", headers=RD).json()[0]
    assert first["traceback"] is None and first["error_class"] is None


def test_an_unfinished_task_answers_202_after_the_timeout(
    web: TestClient, app: jobtrail.App
) -> None:
    task_id = app.enqueue("send", delay=30).id
    r = web.get(f"/api/tasks/{task_id}/result", headers=RD)
    assert r.status_code == 202, r.text
    assert r.json()["finished"] is False and r.json()["state"] == "queued"
    assert r.json()["poll_after"] >= 1 and r.headers["Retry-After"] == str(r.json()["poll_after"])
    started = time.monotonic()
    r = web.get(f"/api/tasks/{task_id}/result?timeout=0.3", headers=RD)
    assert r.status_code == 202 and time.monotonic() - started >= 0.3


def test_the_result_request_waits_for_the_worker(web: TestClient, app: jobtrail.App) -> None:
    task_id = app.enqueue("send", "soon", delay=0.5).id

    def work() -> None:  # burst workers until the delayed task has run
        deadline = time.monotonic() + 20
        while app.get(task_id).state is not jobtrail.State.SUCCEEDED:
            run(app)
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    r = web.get(f"/api/tasks/{task_id}/result?timeout=20", headers=RD)
    worker.join(10)
    assert r.status_code == 200, r.text
    assert r.json()["result"] == "soon"


@pytest.mark.parametrize("bad", ["-1", "31", "soon", "nan"])
def test_a_bad_timeout_is_422(web: TestClient, app: jobtrail.App, bad: str) -> None:
    task_id = app.enqueue("send").id
    r = web.get(f"/api/tasks/{task_id}/result?timeout={bad}", headers=RD)
    assert r.status_code == 422, r.text
    assert "timeout" in r.json()["error"]


def test_unknown_and_other_tenants_tasks_are_404(web: TestClient, app: jobtrail.App) -> None:
    assert web.get("/api/tasks/99999/result", headers=RD).status_code == 404
    other = app.enqueue("send", tenant="tenantB").id
    drain(app, other)
    r = web.get(f"/api/tasks/{other}/result", headers=TA)
    assert r.status_code == 404 and "error" in r.json()
    assert web.get(f"/api/tasks/{other}/result").status_code == 401
