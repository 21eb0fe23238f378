"""Hostile input through the real ``jobtrail serve`` process, on both backends:
every bad request is a 4xx whose body is ``{"error": "<message naming the field>"}``, never a
500, and changes nothing; a store that cannot write (a real full disk on SQLite, a read-only or
full PostgreSQL) is a 503 with ``Retry-After`` that says nothing was stored."""

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

JSON = {**ADM, "Content-Type": "application/json"}


@pytest.fixture
def served(store: Store, tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path, store.url)
    try:
        yield s.wait()
    finally:
        s.stop()


def state(http: httpx.Client) -> Any:
    """Everything a refused request might have changed, read through the API."""
    tasks = http.get("/api/tasks", headers=ADM).json()["tasks"]
    return (
        tasks,
        [http.get(f"/api/tasks/{t['id']}/transitions", headers=ADM).json() for t in tasks],
        http.get("/api/queues", headers=ADM).json()["queues"],
    )


def refusals(task_id: str) -> list[tuple[str, str, dict[str, Any], int, str]]:
    """(method, path, request options, status, what the error must name)."""
    t = f"/api/tasks/{task_id}"
    raw = {"headers": JSON}
    return [
        # finding 1: NUL in list filters and in the operator's name and note
        ("GET", "/api/tasks", {"params": {"kind": "a\x00b"}}, 422, "kind"),
        ("GET", "/api/tasks", {"params": {"tenant": "a\x00b"}}, 422, "tenant"),
        ("GET", "/api/tasks", {"params": {"queue": "a\x00b"}}, 422, "queue"),
        ("GET", "/api/tasks", {"params": {"state": "a\x00b"}}, 422, "state"),
        ("POST", f"{t}/cancel", {"json": {"by": "a\x00"}}, 422, "by"),
        ("POST", f"{t}/cancel", {"json": {"by": "ops", "note": "n\x00"}}, 422, "note"),
        ("POST", f"{t}/replay", {"json": {"by": "\x00", "note": "n"}}, 422, "by"),
        ("POST", "/api/queues/default/pause", {"json": {"by": "ops", "note": "\x00"}}, 422, "note"),
        ("POST", "/api/queues/default/resume", {"json": {"by": "\x00", "note": "n"}}, 422, "by"),
        ("POST", "/api/queues/a%00b/pause", {"json": {"by": "ops", "note": "n"}}, 422, "queue"),
        ("POST", f"{t}/receipt", {"json": {"ok": False, "error": "e\x00"}}, 422, "error"),
        ("POST", "/api/tasks", {"json": {"kind": "send", "tenant": "a\x00"}}, 422, "tenant"),
        ("POST", "/api/tasks", {"json": {"kind": "send", "queue": "a\x00"}}, 422, "queue"),
        ("GET", "/", {"params": {"q": "key\x00"}}, 422, "search"),  # the dashboard's search box
        ("GET", "/", {"params": {"kind": "k\x00"}}, 422, "kind"),
        # finding 2: durations and limits out of range
        ("GET", "/api/tasks", {"params": {"limit": "99999999999999999999"}}, 422, "limit"),
        ("GET", "/dead", {"params": {"since": "99999999999d", "preview": "1"}}, 422, "since"),
        ("GET", "/dead/preview", {"params": {"until": "9999-12-31T23:59:59-01:00"}}, 422, "until"),
        # finding 3: the body means what App.enqueue would accept, no more
        ("POST", "/api/tasks", {"json": {"kind": "send", "priority": True}}, 422, "priority"),
        ("POST", "/api/tasks", {"json": {"kind": "send", "priority": "5"}}, 422, "priority"),
        (
            "POST",
            "/api/tasks",
            {"content": b'{"kind":"send","priority":1e3}', **raw},
            422,
            "priority",
        ),
        ("POST", "/api/tasks", {"json": {"kind": "send", "delay": True}}, 422, "delay"),
        ("POST", "/api/tasks", {"json": {"kind": "send", "delay": "5"}}, 422, "delay"),
        ("POST", "/api/tasks", {"content": b'{"kind":"send","delay":1e400}', **raw}, 422, "delay"),
        (
            "POST",
            "/api/tasks",
            {"json": {"kind": "send", "run_at": "2030-01-01T00:00:00"}},
            422,
            "run_at",
        ),
        (
            "POST",
            "/api/tasks",
            {"json": {"kind": "send", "run_at": "9999-12-31T23:59:59-01:00"}},
            422,
            "run_at",
        ),
        ("POST", "/api/tasks", {"json": {"kind": "send", "run_at": 1700000000}}, 422, "run_at"),
        (
            "POST",
            "/api/tasks",
            {"content": b'{"kind":"send","tenant":"\\ud800"}', **raw},
            422,
            "tenant",
        ),
        ("POST", f"{t}/cancel", {"content": b'{"by":"\\udcff"}', **raw}, 422, "by"),
        ("POST", f"{t}/receipt", {"json": {"ok": "true"}}, 422, "ok"),
        ("POST", f"{t}/receipt", {"json": {"ok": 1}}, 422, "ok"),
        # finding 5: FastAPI's own validation answers in the same shape
        ("POST", f"{t}/cancel", {"json": {}}, 422, "by"),
        ("POST", "/api/tasks", {"content": b'{"kind": ', **raw}, 422, "JSON"),
        ("GET", f"{t}/explain", {"params": {"lang": "xx"}}, 422, "lang"),
        ("GET", "/api/tasks", {"params": {"before": "x"}}, 422, "before"),
    ]


def test_bad_input_is_a_4xx_naming_the_field_and_changes_nothing(served: Server) -> None:
    with httpx.Client(base_url=served.base, timeout=10) as http:
        seeded = http.post("/api/tasks", json={"kind": "send"}, headers=ADM)
        assert seeded.status_code == 201, seeded.text
        before = state(http)
        wrong = []
        for method, path, options, status, field in refusals(seeded.json()["id"]):
            options.setdefault("headers", ADM)
            try:
                r = http.request(method, path, **options)
            except httpx.HTTPError as exc:  # the server dropped the connection
                wrong.append((method, path, options.get("json"), type(exc).__name__, ""))
                continue
            body = r.json() if r.headers.get("content-type") == "application/json" else None
            if r.status_code != status or not isinstance(body, dict) or "detail" in body:
                wrong.append((method, path, options.get("json"), r.status_code, r.text[:200]))
            elif not isinstance(body.get("error"), str) or field not in body["error"]:
                wrong.append((method, path, options.get("json"), "names", body))
        assert wrong == []
        assert state(http) == before
    assert "Traceback" not in served.log.read_text()


def test_every_error_has_one_shape_and_the_openapi_document_says_so(served: Server) -> None:
    with httpx.Client(base_url=served.base, timeout=10) as http:
        answers = [
            http.get("/no/such/route", headers=ADM),
            http.delete("/api/tasks", headers=ADM),
            http.get("/api/tasks"),
            http.get("/api/tasks/999", headers=ADM),
            http.post("/api/tasks", json={"kind": "send", "extra": 1}, headers=ADM),
            http.post("/api/tasks", json={"kind": "nope"}, headers=ADM),
        ]
        assert [r.status_code for r in answers] == [404, 405, 401, 404, 422, 422]
        for r in answers:
            assert set(r.json()) <= {"error", "fields", "task_id", "current_state"}, r.text
            assert isinstance(r.json()["error"], str) and r.json()["error"], r.text
        fields = answers[4].json()["fields"]
        assert fields == [
            {"field": "extra", "in": "body", "message": "extra: Extra inputs are not permitted"}
        ]
        doc = http.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "fields" in schemas["ErrorOut"]["properties"]
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if code[0] in "45":
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorOut"}, (path, method)
    run_at = schemas["EnqueueBody"]["properties"]["run_at"]["anyOf"][0]
    assert run_at == {"type": "string", "format": "date-time"}
    assert schemas["EnqueueBody"]["properties"]["priority"]["type"] == "integer"


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
    """Use up every free block of ``disk``; deleting the file gives them back. Unbuffered: a
    buffered file kept the part of its last block that did not fit and failed again (ENOSPC)
    when closed, whenever the free space was not a multiple of the block written (a
    migration that adds one page to the store was enough)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)  # a short write leaves nothing behind to flush
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
        for table in ("jobtrail_tasks", "jobtrail_transition_log", "jobtrail_queues"):
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
