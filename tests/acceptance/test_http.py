"""The real ``jobtrail serve`` process (uvicorn) on both backends, driven with httpx; and a
bounded schemathesis run against its ``/openapi.json`` that must find no 5xx."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import unavailable
from serve_process import SECRET, SRC, TOKENS, Serve

import jobtrail
from jobtrail.web.signatures import parse_secret, sign

ADM = {"Authorization": "Bearer adm"}


class Server(Serve):
    """A ``Serve`` that is waited for by hand: ``Server(...).wait()``."""

    def __init__(self, tmp: Path, db_url: str, *args: str, tokens: str | None = TOKENS) -> None:
        super().__init__(tmp, db_url, *args, tokens=tokens, wait=False)

    def wait(self) -> Server:
        self._wait()
        return self


@pytest.fixture
def server(store: object, tmp_path: Path) -> Iterator[Server]:
    url = store.url  # type: ignore[attr-defined]
    s = Server(tmp_path, url)
    try:
        yield s.wait()
    finally:
        s.stop()


def test_api_through_the_real_server(server: Server, store: object) -> None:
    with httpx.Client(base_url=server.base, timeout=10) as http:
        r = http.post(
            "/api/tasks",
            json={"kind": "send", "payload": {"n": 1}},
            headers={**ADM, "Idempotency-Key": "k"},
        )
        assert r.status_code == 201, r.text
        task = r.json()
        assert http.get(r.headers["Location"], headers=ADM).json()["state"] == "queued"
        assert (
            http.post(
                "/api/tasks",
                json={"kind": "send", "payload": {"n": 1}},
                headers={**ADM, "Idempotency-Key": "k"},
            ).status_code
            == 200
        )
        assert (
            http.post(
                "/api/tasks",
                json={"kind": "send", "payload": {"n": 2}},
                headers={**ADM, "Idempotency-Key": "k"},
            ).status_code
            == 409
        )
        assert (
            http.post(
                "/api/tasks", json={"kind": "send"}, headers={"Authorization": "Bearer rd"}
            ).status_code
            == 403
        )
        assert http.get("/api/tasks").status_code == 401
        assert (
            http.get(f"/api/tasks/{task['id']}", headers={"Authorization": "Bearer ta"}).status_code
            == 404
        )
        tr = http.get(f"/api/tasks/{task['id']}/transitions", headers=ADM).json()
        assert [t["reason"] for t in tr] == ["enqueued"]
        assert (
            "enqueued" in http.get(f"/api/tasks/{task['id']}/explain", headers=ADM).json()["text"]
        )
        r = http.post(
            f"/api/tasks/{task['id']}/replay", json={"by": "op", "note": "n"}, headers=ADM
        )
        assert r.status_code == 409 and r.json()["current_state"] == "queued"
        assert (
            http.post(f"/api/tasks/{task['id']}/cancel", json={"by": "op"}, headers=ADM).json()[
                "outcome"
            ]
            == "cancelled"
        )
        assert (
            http.post(
                "/api/queues/default/pause", json={"by": "op", "note": "n"}, headers=ADM
            ).json()["paused"]
            is True
        )
        assert http.get("/api/queues", headers=ADM).status_code == 200
        body = json.dumps({"type": "invoice.paid"}).encode()
        stamp = int(time.time())
        hdrs = {
            "webhook-id": "msg_1",
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(parse_secret(SECRET).key, "msg_1", stamp, body),
        }
        first = http.post("/webhooks/pay", content=body, headers=hdrs)
        assert first.status_code == 202
        again = http.post("/webhooks/pay", content=body, headers=hdrs)
        assert again.json() == {"task_id": first.json()["task_id"], "duplicate": True}
        assert http.post("/webhooks/pay", content=body + b" ", headers=hdrs).status_code == 401
        metrics = http.get("/metrics", headers=ADM).text
        assert 'jobtrail_tasks{kind="webhook.pay",queue="default",state="queued"} 1.0' in metrics
    log = server.log.read_text()
    assert "invoice.paid" in log and "msg_1" in log  # delivery id and event type are logged
    assert SECRET not in log and "webhook-signature" not in log and "adm" not in log


def test_serve_refuses_public_bind_without_tokens(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env.update(PYTHONPATH=SRC, JOBTRAIL_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}")
    proc = subprocess.run(
        [sys.executable, "-m", "jobtrail", "serve", "--host", "0.0.0.0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "JOBTRAIL_TOKENS" in proc.stderr and "Traceback" not in proc.stderr


def schemathesis(
    tmp_path: Path, spec: str, base: str, *headers: str, exclude: list[str] | None = None
) -> None:
    """A bounded, deterministic schemathesis run of ``spec`` against ``base`` that must find
    no 5xx answer (``exclude``: paths left out)."""
    st = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    if st is None:
        unavailable("schemathesis is not installed")
    extra = [arg for header in headers for arg in ("-H", header)]
    extra += [arg for path in exclude or [] for arg in ("--exclude-path", path)]
    proc = subprocess.run(
        [st, "run", spec, "--url", base, "--checks", "not_a_server_error"]
        + ["--max-examples", "20", "--seed", "7", "--generation-deterministic", "--no-color"]
        + ["-H", "Authorization: Bearer adm", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
    )
    (tmp_path / "schemathesis.txt").write_text(proc.stdout + proc.stderr)
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


def test_schemathesis_finds_no_5xx(tmp_path: Path) -> None:
    s = Server(tmp_path, f"sqlite:///{tmp_path / 'st.db'}").wait()
    try:
        seeded = httpx.post(s.base + "/api/tasks", json={"kind": "send"}, headers=ADM)
        assert seeded.json()["id"] == "1"  # the id the OpenAPI examples name
        # GET /api/tasks/{id}/result waits out each generated timeout (up to 30 s) for tasks
        # no worker runs: fuzzed here it would only measure sleep. Its bad input (timeouts,
        # ids, tenants) is tested in tests/conformance/test_http_results.py.
        schemathesis(
            tmp_path,
            s.base + "/openapi.json",
            s.base,
            exclude=["/api/tasks/{task_id}/result"],
        )
    finally:
        s.stop()


#: The dashboard's pages and form actions, described for schemathesis (the dashboard is not in
#: the API's OpenAPI document); ``test_the_dashboard_spec_names_every_route`` keeps it whole.
DASHBOARD_SPEC = Path(__file__).with_name("dashboard_forms.openapi.json")


def test_the_dashboard_spec_names_every_route(tmp_path: Path) -> None:
    from fastapi.routing import APIRoute

    from jobtrail.web import create_app
    from jobtrail.web.dashboard import router as dashboard_router

    described = {
        (method.upper(), path)
        for path, ops in json.loads(DASHBOARD_SPEC.read_text())["paths"].items()
        for method in ops
    }
    app = jobtrail.App(f"sqlite:///{tmp_path / 'spec.db'}")
    session = [
        r
        for r in create_app(app, tokens="adm:admin").routes
        if getattr(r, "path", None) in ("/login", "/logout")
    ]
    served = {
        (method, route.path.replace(":path", ""))
        for route in [*dashboard_router(app).routes, *session]
        if isinstance(route, APIRoute) and not route.path.startswith("/static/")
        for method in route.methods - {"HEAD"}
    }
    assert described == served


def test_schemathesis_finds_no_5xx_in_the_dashboard_forms(store: object, tmp_path: Path) -> None:
    """The dashboard's forms and filters on both backends, signed in as an admin and sending the
    headers a same-origin browser sends: no input makes a 500 (NUL in a filter did on
    PostgreSQL before every input got one rule)."""
    s = Server(tmp_path, store.url).wait()  # type: ignore[attr-defined]
    try:
        seeded = httpx.post(s.base + "/api/tasks", json={"kind": "send"}, headers=ADM)
        assert seeded.json()["id"] == "1"  # the id the spec's examples name
        schemathesis(
            tmp_path,
            str(DASHBOARD_SPEC),
            s.base,
            f"Origin: {s.base}",
            "Sec-Fetch-Site: same-origin",
        )
    finally:
        s.stop()
