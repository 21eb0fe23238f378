"""An accepted ``POST /api/tasks`` says when to look again (``poll_after`` and ``Retry-After``,
seconds by the database clock), on both backends."""

from __future__ import annotations

import jobtrail

from ._http_support import auth, client, register

ADM = auth("adm")


def test_a_due_task_says_look_again_in_a_second(app: jobtrail.App) -> None:
    web = client(register(app))
    r = web.post("/api/tasks", json={"kind": "send"}, headers=ADM)
    assert r.status_code == 201, r.text
    assert r.json()["poll_after"] == 1 and r.headers["Retry-After"] == "1"


def test_a_delayed_task_says_when_it_is_due(app: jobtrail.App) -> None:
    web = client(register(app))
    r = web.post("/api/tasks", json={"kind": "send", "delay": 90}, headers=ADM)
    assert r.status_code == 201, r.text
    assert r.json()["poll_after"] == 90 and r.headers["Retry-After"] == "90"
    again = web.post("/api/tasks", json={"kind": "send"}, headers={**ADM, "Idempotency-Key": "k"})
    assert again.json()["poll_after"] == 1


def test_an_existing_finished_task_says_look_now(app: jobtrail.App) -> None:
    web = client(register(app))
    headers = {**ADM, "Idempotency-Key": "k"}
    first = web.post("/api/tasks", json={"kind": "send", "delay": 0}, headers=headers)
    assert app.run_worker(burst=True) == 1
    again = web.post("/api/tasks", json={"kind": "send", "delay": 0}, headers=headers)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert again.json()["state"] == "succeeded"
    assert again.json()["poll_after"] == 0 and again.headers["Retry-After"] == "0"
