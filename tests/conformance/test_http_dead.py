"""Dead letters over the JSON API on both backends: ``GET /api/dead`` with the dead letters'
evidence (never the payload) and ``GET /api/replay-runs``; both span tenants, so a
tenant-bound token is refused."""

from __future__ import annotations

import jobtrail

from ._http_support import auth, client, register
from .support import run

ADM, RD, TAR = auth("adm"), auth("rd"), auth("tar")


def test_dead_letters_and_replay_runs_over_http(app: jobtrail.App) -> None:
    web = client(register(app))
    ids = [app.enqueue("fail", {"secret": f"s-{i}"}, idempotency_key=f"k{i}").id for i in (1, 2)]
    run(app)
    r = web.get("/api/dead?tasks=1", headers=RD)
    assert r.status_code == 200, r.text
    [group] = r.json()["groups"]
    assert (group["reason"], group["kind"], group["count"]) == ("permanent_error", "fail", 2)
    assert group["categories"] == ["invalid_input"] and group["attempts"] == {"min": 1, "max": 1}
    assert group["first_failure"] <= group["last_failure"]
    [task] = group["tasks"]
    assert task["id"] in ids and task["input_ref"] == f"key:k{ids.index(task['id']) + 1}"
    assert task["category"] == "invalid_input" and task["last_failure"].endswith("Z")
    assert "s-1" not in r.text and "s-2" not in r.text and 'payload"' not in r.text
    assert len(web.get("/api/dead", headers=RD).json()["groups"][0]["tasks"]) == 2
    assert web.get("/api/dead?tasks=-1", headers=RD).status_code == 422
    assert web.get("/api/dead", headers=TAR).status_code == 403
    assert web.get("/api/dead").status_code == 401

    assert web.get("/api/replay-runs", headers=RD).json() == {"runs": []}
    app.replay_dead(kind="fail", by="ops", note="fixed", batch_size=5)
    [got] = web.get("/api/replay-runs", headers=RD).json()["runs"]
    assert (got["state"], got["replayed"], got["total"], got["by"]) == ("completed", 2, 2, "ops")
    assert got["filter"]["kind"] == "fail" and got["started_at"].endswith("Z")
    assert web.get("/api/replay-runs?limit=0", headers=RD).status_code == 422
    assert web.get("/api/replay-runs", headers=TAR).status_code == 403
