"""``jobtrail doctor`` as a subprocess on both backends: a healthy store exits 0,
an unmigrated, outdated or unreachable one exits 1 naming the cause (the server's own answer,
the command to run); read-only (no file created, nothing written)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from chaos.faultproxy import FaultProxy
from conftest import PG_URL, Store, require_pg, unavailable

import jobtrail
from jobtrail.store.queries import migrations
from jobtrail.store.sqlite import path_from_url
from jobtrail.worker.presence import Presence

PG_CHECKS = ["reachable", "schema", "listen/notify", "clock", "pooler", "workers"]
SQLITE_CHECKS = [
    "file",
    "directory",
    "synchronous",
    "journal",
    "schema",
    "workers",
    "wake-up",
    "clock",
]


def doctor(url: str, *args: str, code: int | None, env: dict[str, str] | None = None) -> Any:
    """``jobtrail doctor`` with ``args``; ``code=None``: whatever it exits with."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    environ.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "jobtrail", "doctor", "--db", url, *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert code is None or proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout) if "--json" in args else proc.stdout


def by_name(report: Any) -> dict[str, Any]:
    return {c["name"]: c for c in report["checks"]}


def test_a_healthy_store_exits_0(store: Store) -> None:
    store.app()  # migrated
    report = doctor(store.url, "--json", code=0)
    checks = by_name(report)
    assert report["ok"] is True
    if store.backend == "postgres":
        assert list(checks) == PG_CHECKS
        assert all(c["status"] == "ok" for c in report["checks"]), report
        assert checks["listen/notify"]["data"]["ms"] is not None
        assert abs(checks["clock"]["data"]["offset_s"]) < 1.0
        assert checks["pooler"]["data"]["mode"] is None  # straight to PostgreSQL
    else:
        assert list(checks) == SQLITE_CHECKS
        assert {n for n, c in checks.items() if c["status"] == "n/a"} == {"wake-up", "clock"}
        assert checks["journal"]["detail"] == "WAL"
        assert checks["synchronous"]["data"]["value"] == "FULL"
    assert checks["schema"]["data"]["current"] == checks["schema"]["data"]["expected"]
    text = doctor(store.url, code=0)
    assert text.splitlines()[-1] == "all is well"
    assert "体检" in doctor(store.url, "--lang", "zh", code=0)


def test_due_work_that_no_live_worker_takes_exits_1(store: Store) -> None:
    """Live workers: before, doctor said "all is well" with due work and no worker running."""
    app = store.app()
    release = threading.Event()
    app.task("resize")(lambda ctx, p: release.wait(30))
    app.task("mail", queue="mail")(lambda ctx, p: None)
    app.enqueue("resize")
    app.enqueue("resize")
    app.enqueue("mail")
    app.enqueue("mail", delay=3600)  # not due: no worker is missing for it yet
    report = doctor(store.url, "--json", code=1)
    workers = by_name(report)["workers"]
    assert workers["status"] == "warn" and workers["data"]["live"] == []
    assert workers["data"]["unserved"] == [
        {"queue": "default", "kind": "resize", "due": 2, "why": "queue"},
        {"queue": "mail", "kind": "mail", "due": 1, "why": "queue"},
    ]
    assert [c["name"] for c in report["checks"] if c["status"] != "ok"] == (
        ["workers"] if store.postgres else ["workers", "wake-up", "clock"]
    )
    text = doctor(store.url, code=1)
    assert (
        "3 due tasks wait for a worker that is not there: 2 in queue default (kind resize): "
        "no live worker serves queue default; 1 in queue mail (kind mail): no live worker "
        "serves queue mail (0 live workers: `jobtrail workers` lists them)"
    ) in text
    assert text.splitlines()[-1] == "1 problem(s) found"
    # A worker for the default queue takes the resize tasks; mail still has none. Then one
    # (of another process) serves queue mail but registers another kind.
    handle = app.start_worker(queues=["default"], concurrency=2)
    try:
        beat = Presence(
            app._driver,
            "other:1:aa",
            queues=["mail"],
            kinds=["newsletter"],
            concurrency=1,
            version=None,
            interval=5,
            stale_after=60,
        )
        beat.beat(force=True)
        deadline = time.monotonic() + 15
        while app.list(state="queued", queue="default"):
            assert time.monotonic() < deadline, "the worker did not take the resize tasks"
            time.sleep(0.02)
        workers = by_name(doctor(store.url, "--json", code=1))["workers"]
        assert workers["data"]["unserved"] == [
            {"queue": "mail", "kind": "mail", "due": 1, "why": "kind"}
        ]
        assert len(workers["data"]["live"]) == 2
        assert (
            "1 of kind mail (queue mail): no live worker registers kind mail" in (workers["detail"])
        )
        # Once a live worker takes every due task, all is well again.
        Presence(
            app._driver,
            "other:2:bb",
            queues=["mail"],
            kinds=["mail"],
            concurrency=1,
            version=None,
            interval=5,
            stale_after=60,
        ).beat(force=True)
        ok = by_name(doctor(store.url, "--json", code=0))["workers"]
        assert ok["status"] == "ok" and ok["detail"].startswith("3 live workers; every due task")
    finally:
        release.set()
        handle.stop()


def test_an_unmigrated_store_exits_1_naming_migrate(store: Store) -> None:
    report = doctor(store.url, "--json", code=1)
    schema = by_name(report)["schema"]
    assert schema["status"] == "fail"
    assert f"run `jobtrail migrate --db {store.url}`" in schema["detail"]
    if store.backend == "sqlite":
        assert by_name(report)["file"]["status"] == "fail"
        assert not os.path.exists(path_from_url(store.url))  # the doctor created nothing
    else:
        assert by_name(report)["reachable"]["status"] == "ok"


def test_a_schema_behind_the_code_names_the_missing_migration(store: Store) -> None:
    store.app()
    latest = doctor(store.url, "--json", code=0)["checks"]
    expected = by_name({"checks": latest})["schema"]["data"]["expected"]
    if store.backend == "sqlite":
        with sqlite3.connect(path_from_url(store.url)) as conn:
            conn.execute("DELETE FROM jobtrail_migrations WHERE version = ?", (expected,))
    else:
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute("DELETE FROM jobtrail_migrations WHERE version = %s", (expected,))
    schema = by_name(doctor(store.url, "--json", code=1))["schema"]
    assert schema["status"] == "fail" and f"migrations [{expected}] not applied" in schema["detail"]
    versions = [v for v, _, _ in migrations(store.backend)]  # numbers may skip (reserved ones)
    assert schema["data"]["current"] == max(v for v in versions if v != expected)
    assert schema["data"]["missing"] == [expected]


def test_a_workers_table_it_cannot_read_is_a_failure_not_a_crash(store: Store) -> None:
    store.app()
    if store.postgres:
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute("DROP TABLE jobtrail_workers")
    else:
        with sqlite3.connect(path_from_url(store.url)) as conn:
            conn.execute("DROP TABLE jobtrail_workers")
    workers = by_name(doctor(store.url, "--json", code=1))["workers"]
    assert workers["status"] == "fail"
    assert workers["detail"].startswith("cannot read the workers: ")
    assert "jobtrail_workers" in workers["detail"]


def _pg(**parts: Any) -> str:
    url = urlsplit(PG_URL)
    netloc = f"{url.username}@{url.hostname}:{parts.get('port', url.port)}"
    return urlunsplit(url._replace(netloc=netloc, path="/" + parts.get("db", "postgres")))


@pytest.mark.parametrize(
    ("url", "answer"),
    [
        (lambda: _pg(db="jobtrail_no_such_db"), 'database "jobtrail_no_such_db" does not exist'),
        (lambda: _pg(port=1), "Connection refused"),
    ],
    ids=["no such database", "closed port"],
)
def test_an_unreachable_postgres_exits_1_with_the_servers_answer(url: Any, answer: str) -> None:
    require_pg()
    report = doctor(url(), "--json", code=1)
    checks = by_name(report)
    assert checks["reachable"]["status"] == "fail" and answer in checks["reachable"]["detail"]
    assert {checks[n]["status"] for n in PG_CHECKS[1:]} == {"n/a"}
    assert answer in doctor(url(), code=1)


def test_sqlite_synchronous_normal_is_a_warning(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'normal.db'}"
    with jobtrail.App(url) as app:
        app.migrate()
    env = {"JOBTRAIL_SQLITE_SYNCHRONOUS": "NORMAL"}
    check = by_name(doctor(url, "--json", code=1, env=env))["synchronous"]
    assert check["status"] == "warn" and "power loss" in check["detail"]


def test_a_proxy_in_front_of_postgres_is_detected(pg: Store) -> None:
    pg.app()
    url = urlsplit(pg.url)
    with FaultProxy(url.hostname or "127.0.0.1", url.port or 5432) as proxy:
        through = urlunsplit(url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}"))
        report = doctor(through, "--json", code=0)
    pooler = by_name(report)["pooler"]
    assert pooler["status"] == "ok" and pooler["data"]["mode"] == "session or proxy"
    assert f"port {proxy.port} is answered by a server listening on {url.port}" in pooler["detail"]


@contextmanager
def pgbouncer(mode: str) -> Iterator[int]:
    """A real PgBouncer (Debian's package; ``.ci/run`` installs it) in ``mode`` in front of the
    test PostgreSQL, on a free port; yields the port."""
    binary = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None
    )
    if binary is None:
        unavailable("pgbouncer is not installed (apt-get install pgbouncer)")
    upstream = urlsplit(PG_URL)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    folder = Path(tempfile.mkdtemp(prefix="jobtrail-pgbouncer-"))
    folder.chmod(0o755)  # pgbouncer drops root for the postgres user, who must read these
    (folder / "users.txt").write_text(f'"{upstream.username}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        textwrap.dedent(f"""
            [databases]
            * = host={upstream.hostname} port={upstream.port or 5432}
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = {port}
            auth_type = trust
            auth_file = {folder / "users.txt"}
            pool_mode = {mode}
            unix_socket_dir =
            ignore_startup_parameters = options
        """)
    )
    for f in folder.iterdir():
        f.chmod(0o644)
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    proc = subprocess.Popen(
        [binary, *user, str(folder / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "pgbouncer did not start listening"
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def test_pgbouncer_in_transaction_mode_is_detected_and_listen_fails(pg: Store) -> None:
    pg.app()
    db = urlsplit(PG_URL).path
    with pgbouncer("transaction") as port:
        url = f"postgresql://{urlsplit(PG_URL).username}@127.0.0.1:{port}{db}"
        report = doctor(url, "--json", code=1)
    checks = by_name(report)
    assert checks["reachable"]["status"] == "ok"
    assert (
        checks["pooler"]["status"] == "warn" and checks["pooler"]["data"]["mode"] == "transaction"
    )
    assert 'pooler="transaction"' in checks["pooler"]["detail"]
    # LISTEN through a transaction pooler: the notification never arrives
    assert checks["listen/notify"]["status"] == "warn"


def test_behind_a_transaction_pooler_the_round_trip_listens_on_the_listen_url(pg: Store) -> None:
    """With ``--listen-url`` (a direct URL) the LISTEN side connects there, as the workers'
    does, and the NOTIFY sent through the pooler arrives: the round trip is ok."""
    pg.app()
    db = urlsplit(PG_URL).path
    with pgbouncer("transaction") as port:
        url = f"postgresql://{urlsplit(PG_URL).username}@127.0.0.1:{port}{db}"
        report = doctor(url, "--json", "--listen-url", PG_URL, code=None)
        broken = doctor(url, "--json", "--listen-url", _pg(port=1), code=1)
    assert by_name(report)["listen/notify"]["status"] == "ok"
    bad = by_name(broken)["listen/notify"]
    assert bad["status"] == "fail" and bad["detail"].startswith("listen URL: ")


def test_pgbouncer_in_session_mode_is_a_proxy_that_works(pg: Store) -> None:
    pg.app()
    db = urlsplit(PG_URL).path
    with pgbouncer("session") as port:
        url = f"postgresql://{urlsplit(PG_URL).username}@127.0.0.1:{port}{db}"
        # (PgBouncer drops the test's search_path option: the schema check sees the database's
        # default schema, migrated or not)
        report = doctor(url, "--json", code=None)
    checks = by_name(report)
    assert checks["reachable"]["status"] == checks["clock"]["status"] == "ok"
    assert checks["pooler"]["data"]["mode"] == "session or proxy"
    assert checks["listen/notify"]["status"] == "ok"
