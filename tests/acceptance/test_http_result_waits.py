"""Result waits (``GET /api/tasks/{id}/result?timeout=30``) through a real ``jobtrail serve``
on both backends: 50 waits hold neither the server's 40 request threads nor a
PostgreSQL connection each, so every other request is answered at once meanwhile; a token's
11th wait is 429 with ``Retry-After``; and the waits end when the task finishes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import Serve, wait_until

import jobtrail

READERS = [f"r{i}" for i in range(5)]
TOKENS = ",".join(["adm:admin", *(f"{r}:read" for r in READERS)])
APP_MODULE = """
import jobtrail

app = jobtrail.App()


@app.task("send", queue="held")
def send(ctx, payload):
    return {"sent": payload}
"""
PG_PORT = 5432


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def served(store: Any, tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path, store.url, tokens=TOKENS, app_module=APP_MODULE)
    try:
        yield s
    finally:
        s.stop()


def pg_connections(pid: int) -> int:
    """TCP connections the process ``pid`` holds to PostgreSQL's port (its sockets matched
    against the kernel's TCP tables)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == PG_PORT and fields[9] in inodes:
                count += 1
    return count


def waiting(s: Serve) -> float:
    text = httpx.get(s.base + "/metrics", headers=bearer("adm"), timeout=10).text
    line = next(ln for ln in text.splitlines() if ln.startswith("jobtrail_result_waits "))
    return float(line.split()[1])


def test_fifty_result_waits_hold_no_thread_and_no_connection_each(
    served: Serve, store: Any
) -> None:
    made = httpx.post(
        served.base + "/api/tasks", json={"kind": "send", "payload": 7}, headers=bearer("adm")
    )
    assert made.status_code == 201, made.text
    task_id = made.json()["id"]
    url = f"{served.base}/api/tasks/{task_id}/result?timeout=30"
    with ThreadPoolExecutor(max_workers=51) as pool:
        futures = [
            pool.submit(httpx.get, url, headers=bearer(r), timeout=60)
            for r in READERS
            for _ in range(10)
        ]
        wait_until(lambda: waiting(served) == 50, 20, "50 result waits")
        # every other request is answered at once (before: ~28 s, behind 40 busy threads)
        for method, path, token in (
            ("GET", "/api/queues", "adm"),
            ("GET", "/", "adm"),
            ("POST", "/api/tasks", "adm"),
            ("GET", f"/api/tasks/{task_id}", "r0"),
        ):
            started = time.monotonic()
            r = httpx.request(
                method,
                served.base + path,
                headers=bearer(token),
                json={"kind": "send"} if method == "POST" else None,
                timeout=10,
            )
            assert r.status_code in (200, 201), (path, r.status_code, r.text)
            assert time.monotonic() - started < 3, (path, time.monotonic() - started)
        # a token's eleventh wait
        extra = httpx.get(url, headers=bearer("r0"), timeout=10)
        assert extra.status_code == 429, extra.text
        assert extra.headers["retry-after"] == "2"
        if store.backend != "sqlite":
            # the pool's (10 at most), the express connection and one LISTEN connection for
            # all waits: not one per wait (before: 51 for 40 waits)
            held = pg_connections(served.proc.pid)
            assert held <= 12, held
        # the task finishes: every wait answers with its result, well before its timeout
        with jobtrail.App(store.url) as app:
            app.task("send", queue="held")(lambda ctx, payload: {"sent": payload})
            started = time.monotonic()
            app.run_worker(queues=["held"], burst=True)
        answers = [f.result() for f in futures]
    assert time.monotonic() - started < 10
    assert {a.status_code for a in answers} == {200}
    assert {a.json()["result"]["sent"] for a in answers} == {7}
    assert waiting(served) == 0
