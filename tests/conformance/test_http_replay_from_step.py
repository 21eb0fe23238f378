"""Replay from a step over the JSON API, in process on both backends: the replay route's
``from_step`` field, the replay preview, and bad input answered 4xx with nothing written."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import jobtrail

from ._http_support import auth, client
from .test_replay_from_step import dead_order

ADM, RD, TA = auth("adm"), auth("rd"), auth("ta")


@pytest.fixture
def web(app: jobtrail.App) -> TestClient:
    return client(app)


def test_replay_from_a_step_over_http(web: TestClient, app: jobtrail.App) -> None:
    handler, task_id = dead_order(app)
    r = web.get(f"/api/tasks/{task_id}/replay-preview?from_step=pack", headers=RD)
    assert r.status_code == 200, r.text
    preview = r.json()
    assert preview["replayable"] is True
    assert preview["forgotten"] == ["pack"]
    assert preview["effects"]["again"] == []
    [kept] = preview["effects"]["skip"]
    assert (kept["name"], kept["provider_ids"], kept["forgotten"]) == ("charge", ["ch_1"], False)
    r = web.get(f"/api/tasks/{task_id}/replay-preview?from_step=charge", headers=RD)
    assert [(e["name"], e["forgotten"]) for e in r.json()["effects"]["again"]] == [("charge", True)]

    r = web.post(
        f"/api/tasks/{task_id}/replay",
        json={"by": "op", "note": "carrier fixed", "from_step": "pack"},
        headers=ADM,
    )
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "queued"
    assert app.transitions(task_id)[-1].data == {"from_step": "pack", "superseded": ["pack"]}
    assert [s["name"] for s in app.steps(task_id)] == ["reserve", "charge"]


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({"from_step": "nope"}, 422, "from_step 'nope'"),
        ({"from_step": ""}, 422, "from_step"),
        ({"from_step": 5}, 422, "from_step"),
        ({"from_step": "x" * 201}, 422, "from_step"),
    ],
)
def test_a_bad_from_step_is_4xx_and_writes_nothing(
    web: TestClient, app: jobtrail.App, body: dict, code: int, says: str
) -> None:
    _, task_id = dead_order(app)
    before = (app.get(task_id), app.transitions(task_id), app.steps(task_id, superseded=True))
    r = web.post(
        f"/api/tasks/{task_id}/replay", json={"by": "op", "note": "n", **body}, headers=ADM
    )
    assert r.status_code == code, r.text
    assert says in r.text
    if isinstance(body["from_step"], str) and body["from_step"]:
        r = web.get(f"/api/tasks/{task_id}/replay-preview", params=body, headers=RD)
        assert r.status_code == code and says in r.text, r.text
    after = (app.get(task_id), app.transitions(task_id), app.steps(task_id, superseded=True))
    assert after == before


def test_replay_from_a_step_of_a_live_task_is_409(web: TestClient, app: jobtrail.App) -> None:
    app.task("ok")(lambda ctx, p: None)
    task = app.enqueue("ok", delay=3600)
    r = web.post(
        f"/api/tasks/{task.id}/replay",
        json={"by": "op", "note": "n", "from_step": "a"},
        headers=ADM,
    )
    assert r.status_code == 409, r.text
    assert r.json()["current_state"] == "queued"


def test_another_tenants_task_is_404_for_the_preview(web: TestClient, app: jobtrail.App) -> None:
    _, task_id = dead_order(app)  # tenant ""
    r = web.get(f"/api/tasks/{task_id}/replay-preview", headers=TA)
    assert r.status_code == 404


def test_the_dashboard_replay_form_offers_from_step(app: jobtrail.App) -> None:
    from jobtrail.web.server import create_app

    _, task_id = dead_order(app)
    origin = {"Origin": "http://testserver"}
    with TestClient(create_app(app, tokens="adm:admin")) as web:
        web.post("/login", data={"token": "adm"})
        page = web.get(f"/tasks/{task_id}").text
        assert 'name="from_step"' in page and '<option value="charge">' in page
        bad = web.post(
            f"/tasks/{task_id}/replay",
            data={"by": "op", "note": "n", "from_step": "nope"},
            headers=origin,
        )
        assert bad.status_code == 422 and "from_step 'nope'" in bad.text
        assert app.get(task_id).state == "dead"
        done = web.post(
            f"/tasks/{task_id}/replay",
            data={"by": "op", "note": "n", "from_step": "pack"},
            headers=origin,
            follow_redirects=False,
        )
        assert done.status_code == 303, done.text
    assert app.transitions(task_id)[-1].data == {"from_step": "pack", "superseded": ["pack"]}
