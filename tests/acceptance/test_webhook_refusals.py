"""Webhook kinds through the real processes: a webhook kind is refused by ``jobtrail serve``'s
``POST /api/tasks`` (422, a tenant-bound admin token included: the forgery of the finding)
and by ``jobtrail enqueue`` (exit 2), and nothing is stored; the signed route still makes
its task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import SECRET, SRC, Serve

from jobtrail.web.signatures import parse_secret, sign

TOKENS = "adm:admin,ta:admin:tenantA"
APP_MODULE = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("send")
    def send(ctx, payload):
        return payload


    @app.task("submit")
    def submit(ctx, payload):
        ctx.await_receipt(payload["receipt"], timeout=600)


    @app.webhook("pay", receipt=lambda e: (e["receipt"], e["ok"], e.get("category"), None))
    def pay(ctx, event):
        return None
""")
REFUSAL = "webhook tasks are made only by POST /webhooks/pay"


def env_for(db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env.update(PYTHONPATH=SRC, JOBTRAIL_DATABASE_URL=db_url)
    return env


@pytest.fixture
def served(store: Any, tmp_path: Path) -> Iterator[str]:
    """``jobtrail serve`` on the test's store; yields its base URL."""
    server = Serve(tmp_path, store.url, tokens=TOKENS, app_module=APP_MODULE)
    try:
        yield server.base
    finally:
        server.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def stored(base: str) -> list[dict[str, Any]]:
    r = httpx.get(base + "/api/tasks", headers=bearer("adm"), timeout=10)
    assert r.status_code == 200, r.text
    tasks: list[dict[str, Any]] = r.json()["tasks"]
    return tasks


def test_serve_refuses_webhook_kinds_from_post_api_tasks(served: str) -> None:
    for token in ("ta", "adm"):
        for extra in ({}, {"Idempotency-Key": "forged-1"}):
            r = httpx.post(
                served + "/api/tasks",
                json={"kind": "webhook.pay", "payload": {"receipt": "rcpt-x", "ok": False}},
                headers={**bearer(token), **extra},
                timeout=10,
            )
            assert r.status_code == 422, (token, r.status_code, r.text)
            error = r.json()["error"]
            assert "'webhook.pay'" in error and REFUSAL in error, error
    assert stored(served) == []
    # the signed route makes the same kind, in the tenant of the source ("" here)
    body = json.dumps({"type": "receipt", "receipt": "rcpt-x", "ok": True}).encode()
    stamp = int(time.time())
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(parse_secret(SECRET).key, "msg_1", stamp, body),
        "content-type": "application/json",
    }
    r = httpx.post(served + "/webhooks/pay", content=body, headers=headers, timeout=10)
    assert r.status_code == 202, r.text
    [task] = stored(served)
    assert (task["id"], task["kind"], task["tenant"]) == (r.json()["task_id"], "webhook.pay", "")


def run_cli(cwd: Path, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "jobtrail", *args]
    return subprocess.run(
        argv, cwd=cwd, env=env_for(db_url), capture_output=True, text=True, timeout=60
    )


def test_cli_enqueue_of_a_webhook_kind_exits_2_and_stores_nothing(tmp_path: Path) -> None:
    (tmp_path / "secapp.py").write_text(APP_MODULE)
    db = f"sqlite:///{tmp_path / 't.db'}"
    assert run_cli(tmp_path, db, "migrate").returncode == 0  # enqueue never creates the file
    for extra in ([], ["--key", "k1"], ["--tenant", "tenantA"]):
        done = run_cli(
            tmp_path,
            db,
            "enqueue",
            "webhook.pay",
            '{"receipt": "r"}',
            "--app",
            "secapp:app",
            *extra,
        )
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith("jobtrail: error: ") and done.stderr.count("\n") == 1
        assert "'webhook.pay'" in done.stderr and REFUSAL in done.stderr, done.stderr
    listed = run_cli(tmp_path, db, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    # an ordinary kind still goes in
    assert run_cli(tmp_path, db, "enqueue", "send", "{}", "--app", "secapp:app").returncode == 0
