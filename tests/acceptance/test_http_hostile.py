"""Hostile conditions through the real ``jobtrail serve`` process (§14, §16.7): a store that
cannot write (a real full disk on SQLite, a read-only or full PostgreSQL) is a 503 with
``Retry-After`` that says nothing was stored, never a 500."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from conftest import PG_URL, Store
from test_http import ADM, Server


# -- a store that cannot write ----------------------------------------------------------------
def cannot_write(r: httpx.Response) -> None:
    assert r.status_code == 503, r.text
    assert int(r.headers["Retry-After"]) > 0
    assert r.json() == {
        "error": "the store cannot write (disk full or read-only); nothing was stored"
    }


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB file system (tmpfs), which fills up; needs root to mount."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def fill(disk: Path) -> Path:
    """Use up every free block of ``disk``; deleting the file gives them back."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_is_503_and_nothing_is_stored(small_disk: Path, tmp_path: Path) -> None:
    s = Server(tmp_path, f"sqlite:///{small_disk / 'full.db'}").wait()
    try:
        with httpx.Client(base_url=s.base, timeout=30) as http:
            assert http.post("/api/tasks", json={"kind": "send"}, headers=ADM).status_code == 201
            filler = fill(small_disk)
            big = {"kind": "send", "payload": "x" * 900_000}
            accepted = 1
            for _ in range(12):  # what the journal already holds may take a task or two
                r = http.post("/api/tasks", json=big, headers=ADM)
                if r.status_code != 201:
                    break
                accepted += 1
            cannot_write(r)
            tasks = http.get("/api/tasks", headers=ADM).json()["tasks"]
            assert len(tasks) == accepted  # reads still work; the refused task is not there
            filler.unlink()
            assert http.post("/api/tasks", json={"kind": "send"}, headers=ADM).status_code == 201
    finally:
        s.stop()
    assert "Traceback" not in s.log.read_text()


def pg_url(schema: str, *options: str) -> str:
    flags = " ".join([f"-csearch_path={schema}", *options])
    return f"{PG_URL}{'&' if '?' in PG_URL else '?'}options={quote(flags)}"


def test_read_only_and_full_postgres_are_503(pg: Store, tmp_path: Path) -> None:
    """PostgreSQL's own errors from a live server: 25006 (every transaction read-only, as on a
    standby) and 53100 (raised by a trigger with the disk_full code, as a full disk does)."""
    app = pg.app()

    @app.task("send")
    def send(ctx: Any, payload: Any) -> None:
        return None

    task = app.enqueue("send")
    schema = pg.url.split("search_path%3D", 1)[1].split("&", 1)[0]
    with psycopg.connect(pg.url) as conn:
        conn.execute(
            "CREATE FUNCTION jobtrail_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN IF current_setting('jobtrail_test.full', true) = 'on' THEN RAISE EXCEPTION "
            "'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; "
            "END IF; RETURN NEW; END $$"
        )
        for table in ("jobtrail_tasks", "jobtrail_transitions", "jobtrail_queues"):
            conn.execute(
                f"CREATE TRIGGER full_disk BEFORE INSERT OR UPDATE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION jobtrail_test_disk_full()"
            )
    before = (app.list(), app.transitions(task.id), app.queues())
    for setting in ("-cdefault_transaction_read_only=on", "-cjobtrail_test.full=on"):
        s = Server(tmp_path, pg_url(schema, setting)).wait()
        try:
            with httpx.Client(base_url=s.base, timeout=30) as http:
                cannot_write(http.post("/api/tasks", json={"kind": "send"}, headers=ADM))
                act = {"by": "ops", "note": "n"}
                cannot_write(http.post(f"/api/tasks/{task.id}/cancel", json=act, headers=ADM))
                cannot_write(http.post("/api/queues/default/pause", json=act, headers=ADM))
                assert [t["id"] for t in http.get("/api/tasks", headers=ADM).json()["tasks"]] == [
                    task.id
                ]
        finally:
            s.stop()
        assert "Traceback" not in s.log.read_text()
    assert (app.list(), app.transitions(task.id), app.queues()) == before
