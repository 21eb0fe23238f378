"""Store unreachable: 503 with Retry-After, never a 2xx for a task that was not stored."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import Any

import jobtrail

from ._http_support import auth, client, register

ADM = auth("adm")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_postgres_nobody_listening_is_503() -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    app = register(jobtrail.App(url, connect_timeout=1.0))
    try:
        web = client(app)
        r = web.post("/api/tasks", json={"kind": "send"}, headers=ADM)
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"].isdigit()
        assert "nothing was stored" in r.json()["error"]
        for path in ("/api/tasks", "/api/tasks/1", "/api/queues"):
            got = web.get(path, headers=ADM)
            assert got.status_code == 503 and "Retry-After" in got.headers, path
        metrics = web.get("/metrics", headers=ADM)
        assert metrics.status_code == 200 and "jobtrail_up 0.0" in metrics.text
    finally:
        app.close()


def test_sqlite_locked_is_503(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    app = register(jobtrail.App(url, busy_timeout=0.2))
    app.migrate()
    holder = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        web = client(app)
        r = web.post("/api/tasks", json={"kind": "send"}, headers=ADM)
        assert r.status_code == 503, r.text
        assert "Retry-After" in r.headers
        holder.execute("ROLLBACK")
        assert app.list() == []
        assert web.post("/api/tasks", json={"kind": "send"}, headers=ADM).status_code == 201
    finally:
        holder.close()
        app.close()


def test_a_store_without_the_schema_is_503_naming_migrate(store: Any) -> None:
    app = register(jobtrail.App(store.url))  # never migrated
    try:
        web = client(app)
        r = web.post("/api/tasks", json={"kind": "send"}, headers=ADM)
        assert r.status_code == 503, r.text
        assert "Retry-After" in r.headers
        assert "no jobtrail schema" in r.json()["error"] and "jobtrail migrate" in r.json()["error"]
        assert store.url not in r.text  # the URL is the server's business
        got = web.get("/api/tasks/1", headers=ADM)
        assert got.status_code == 503 and "jobtrail migrate" in got.json()["error"]
    finally:
        app.close()
