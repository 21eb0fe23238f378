"""`jobtrail serve` mounts the dashboard next to the API, with the API's tokens."""

from __future__ import annotations

from fastapi.testclient import TestClient

import jobtrail
from jobtrail.web.server import create_app


def test_dashboard_is_served_with_the_api_tokens(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k", {})
    with TestClient(create_app(app, tokens="adm:admin,rd:read,ten:read:t1")) as web:
        assert web.get("/").status_code == 401
        assert web.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert web.get("/", headers={"Authorization": "Bearer rd"}).status_code == 200
        # a person signs in once; the token rides in an HttpOnly cookie
        assert web.post("/login", data={"token": "wrong"}).status_code == 401
        signed = web.post("/login", data={"token": "rd"}, follow_redirects=False)
        assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
        assert web.get(f"/tasks/{task.id}").status_code == 200
        # a read token may look but not act
        acted = web.post(
            "/queues/default/pause",
            data={"by": "x", "note": "y"},
            headers={"Origin": "http://testserver"},
        )
        assert acted.status_code == 403
        assert app.queues()[0]["paused"] is False
        # the API is unchanged
        got = web.get(f"/api/tasks/{task.id}", headers={"Authorization": "Bearer adm"})
        assert got.status_code == 200 and got.json()["id"] == task.id
    with TestClient(create_app(app, tokens="ten:read:t1")) as web:  # another tenant's task
        web.post("/login", data={"token": "ten"})
        assert web.get(f"/tasks/{task.id}").status_code == 404


def test_no_tokens_means_open_on_loopback(app: jobtrail.App) -> None:
    # (loopback: without tokens only the loopback Host names are answered)
    with TestClient(create_app(app, tokens=""), base_url="http://127.0.0.1") as web:
        assert web.get("/").status_code == 200
        assert web.get("/queues").status_code == 200
        assert web.get("/", headers={"Host": "testserver"}).status_code == 400
