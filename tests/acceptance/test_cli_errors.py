"""One exit code per kind of error (``jobtrail.cli.EXIT_CODES``, issue 17 item 5), each seen
from the real CLI as a subprocess: the message names the cause in one line, and nothing is
written. Also: ``serve`` refuses a store it cannot use, and a second SIGINT stops a worker at
once (what it abandons is recovered by the lease rules)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import PG_URL, Store, require_pg

import jobtrail
from jobtrail.cli import EXIT_CODES

APP = textwrap.dedent("""
    import os, pathlib, time
    import jobtrail

    app = jobtrail.App()


    @app.task("echo")
    def echo(ctx, payload):
        return payload


    @app.task("sleepy", lease_seconds=1.0)
    def sleepy(ctx, payload):
        pathlib.Path(os.environ["MARKS"], f"started-{ctx.task_id}").touch()
        time.sleep(60)
""")
SEEN: set[int] = set()  # the codes the tests below saw (the last test checks it is all)


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["JOBTRAIL_DATABASE_URL"] = url
    env["MARKS"] = str(tmp_path)
    return env


def jobtrail_cli(
    tmp_path: Path, url: str, *args: str, code: int
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "errapp.py").write_text(APP)
    proc = subprocess.run(
        [sys.executable, "-m", "jobtrail", *args],
        cwd=tmp_path,
        env=_env(tmp_path, url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    if code:
        assert proc.stderr.startswith("jobtrail: error: "), proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
    SEEN.add(code)
    return proc


def _pg(db: str) -> str:
    return urlunsplit(urlsplit(PG_URL)._replace(path=f"/{db}", query=""))


def test_0_ok_1_refused_2_bad_input(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ok.db'}"
    jobtrail_cli(tmp_path, url, "migrate", code=0)
    assert "no task with id '999'" in jobtrail_cli(tmp_path, url, "status", "999", code=1).stderr
    # an unknown kind is bad input, with an app that lacks it and without any app
    err = jobtrail_cli(tmp_path, url, "enqueue", "nope", "--app", "errapp:app", code=2).stderr
    assert "unknown task kind 'nope'" in err and "echo, sleepy" in err
    err = jobtrail_cli(tmp_path, url, "enqueue", "nope", code=2).stderr
    assert "unknown task kind 'nope'" in err and "--app" in err
    err = jobtrail_cli(tmp_path, url, "enqueue", "echo", "{x", "--app", "errapp:app", code=2)
    assert "PAYLOAD_JSON is not valid JSON" in err.stderr
    assert jobtrail.App(url).list() == []  # nothing was written


def test_3_no_database_file_names_migrate_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    url = f"sqlite:///{path}"
    # (enqueue, worker and serve migrate by themselves: a CLI convenience, docs/operations.md)
    for args in (("list",), ("status", "1"), ("explain", "1"), ("stats",)):
        err = jobtrail_cli(tmp_path, url, *args, code=3).stderr
        assert f"run `jobtrail migrate --db {url}`" in err, err
    assert not path.exists()


def test_3_migrate_into_a_missing_directory_names_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}"
    err = jobtrail_cli(tmp_path, url, "migrate", code=3).stderr
    assert f"the directory {tmp_path / 'no' / 'such'} does not exist" in err


def test_3_postgres_refusing_the_connection_says_why(tmp_path: Path) -> None:
    require_pg()
    url = _pg("jobtrail_no_such_db")
    for args in (("list",), ("migrate",), ("worker", "--app", "errapp:app", "--burst")):
        err = jobtrail_cli(tmp_path, url, *args, code=3).stderr
        assert 'database "jobtrail_no_such_db" does not exist' in err, err
        assert "PoolTimeout" not in err


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_serve_refuses_a_store_it_cannot_use(tmp_path: Path, backend: str) -> None:
    if backend == "postgres":
        require_pg()
        url, why = _pg("jobtrail_no_such_db"), 'database "jobtrail_no_such_db" does not exist'
    else:
        url = f"sqlite:///{tmp_path / 'no' / 'dir' / 'x.db'}"
        # serve never creates the file (only migrate does): the missing file is the answer
        why = f"no database file at {tmp_path / 'no' / 'dir' / 'x.db'}"
    (tmp_path / "errapp.py").write_text(APP)
    proc = subprocess.run(
        [sys.executable, "-m", "jobtrail", "serve", "--port", "0", "--app", "errapp:app"],
        cwd=tmp_path,
        env=_env(tmp_path, url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert why in proc.stderr and "Uvicorn running" not in proc.stderr
    SEEN.add(proc.returncode)


def test_a_second_sigint_stops_the_worker_at_once(store: Store, tmp_path: Path) -> None:
    (tmp_path / "errapp.py").write_text(APP)
    app = store.app()

    @app.task("sleepy", lease_seconds=1.0)
    def not_here(payload: Any) -> None:
        raise AssertionError("runs in the worker subprocess")

    task = app.enqueue("sleepy", {})
    log = tmp_path / "worker.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobtrail", "worker", "--app", "errapp:app", "--grace", "60"],
            cwd=tmp_path,
            env=_env(tmp_path, store.url),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        _wait(lambda: (tmp_path / f"started-{task.id}").exists(), proc, "the handler to start")
        proc.send_signal(signal.SIGINT)
        _wait(lambda: "Ctrl-C again" in log.read_text(), proc, "the first SIGINT's drain")
        # draining: the handler sleeps 60 s and the grace is 60 s, so the worker waits
        assert proc.poll() is None, log.read_text()
        assert app.get(task.id).state == jobtrail.State.LEASED
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "second SIGINT, exiting now" in log.read_text()
    SEEN.add(130)
    # abandoned, as a crash abandons it: the lease expires and the sweeper requeues it
    deadline = time.monotonic() + 15
    while app.sweep().get("lease_expired") is None:
        assert time.monotonic() < deadline, app.get(task.id)
        time.sleep(0.1)
    after = app.get(task.id)
    assert (after.state, after.last_reason) == (jobtrail.State.QUEUED, "lease_expired")


def _wait(check: Any, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert proc.poll() is None, f"the worker exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_zz_every_exit_code_was_seen() -> None:
    """Runs last in this module: each code of the table was produced by a test above."""
    if not SEEN:
        pytest.fail("run the whole module: the tests above record the codes they saw")
    assert {code for code, _ in EXIT_CODES} == SEEN, json.dumps(sorted(SEEN))
