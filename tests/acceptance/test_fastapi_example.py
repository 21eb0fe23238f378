"""``examples/fastapi_app`` under a real uvicorn, on both backends: the route enqueues inside
the request's own async transaction (PostgreSQL: a refusal after the enqueue rolls the task
back with the route's own row), the lifespan's background worker runs the task, the client
fetches the result, and SIGTERM stops the worker through the lifespan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
from conftest import Store
from serve_process import SRC, free_port, wait_until

import jobtrail

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_app"


def test_the_fastapi_example_runs(store: Store) -> None:
    port = free_port()
    env = {
        **os.environ,
        "JOBTRAIL_DATABASE_URL": store.url,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app:api", "--port", str(port), "--log-level", "info"],
        cwd=EXAMPLE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                return httpx.get(f"{base}/signups/0", timeout=1).status_code == 404
            except httpx.TransportError:
                return False

        wait_until(up, timeout=30, what="uvicorn to serve the example")
        made = httpx.post(f"{base}/signups", json={"email": "ann@example.com", "name": "Ann"})
        assert made.status_code == 201, made.text
        task_id = made.json()["task_id"]
        assert made.json()["created"] is True
        again = httpx.post(f"{base}/signups", json={"email": "ann@example.com", "name": "Ann"})
        assert again.json() == {"task_id": task_id, "created": False}
        changed = httpx.post(f"{base}/signups", json={"email": "ann@example.com", "name": "A"})
        assert changed.status_code == 409, changed.text

        def finished() -> dict[str, object] | None:
            body = httpx.get(f"{base}/signups/{task_id}").json()
            return body if body["state"] == "succeeded" else None

        deadline = time.monotonic() + 20
        while (body := finished()) is None:
            assert time.monotonic() < deadline, "the lifespan worker did not run the task"
            time.sleep(0.1)
        assert body["result"] == {
            "text": "Welcome, Ann!",
            "mail": {"message_id": f"msg-{task_id}/mail"},
        }
        if store.backend == "postgres":
            refused = httpx.post(f"{base}/signups", json={"email": "bob@invalid"})
            assert refused.status_code == 422
            with psycopg.connect(store.url) as conn:
                rows = conn.execute("SELECT email FROM signups ORDER BY email").fetchall()
            assert rows == [("ann@example.com",)]
        server.send_signal(signal.SIGTERM)
        # uvicorn runs the lifespan's shutdown (the worker's stop), then re-raises the signal
        assert server.wait(timeout=20) in (0, -signal.SIGTERM)
        output = server.stdout.read() if server.stdout else ""
        assert "Application shutdown complete" in output, output
        assert "Traceback" not in output and "ERROR" not in output, output
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    app = store.app()
    assert [(t.id, t.state) for t in app.list()] == [(task_id, jobtrail.State.SUCCEEDED)]
