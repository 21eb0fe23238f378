"""A real ``jobtrail serve`` subprocess on a free loopback port, for the HTTP security tests
(tests/acceptance/test_http_security.py) and the browser ones (tests/browser/test_security.py).

The store is a SQLite file made and seeded by the test itself; the server reads it through the
same URL. ``rss()`` reads the server's own ``/proc/<pid>/status`` so a test can tell what a
request cost in memory.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

import jobtrail

SRC = str(Path(jobtrail.__file__).resolve().parent.parent)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TOKENS = "adm:admin,rd:read,ta:admin:tenantA"
APP_MODULE = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("send")
    def send(ctx, payload):
        return payload


    @app.task("send_email")
    def send_email(ctx, payload):
        return None


    @app.webhook("pay")
    def pay(ctx, event):
        return None
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: object, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``check()`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Serve:
    """``jobtrail serve --app httpapp:app`` over ``db_url`` with ``tokens`` (``None``: none)."""

    def __init__(
        self,
        tmp: Path,
        db_url: str,
        *args: str,
        tokens: str | None = TOKENS,
        env: dict[str, str] | None = None,
        app_module: str = APP_MODULE,
        wait: bool = True,
    ) -> None:
        (tmp / "httpapp.py").write_text(app_module)
        if db_url.startswith("sqlite:"):  # serve refuses a missing file: only migrate makes one
            with jobtrail.App(db_url) as made:
                made.migrate()
        self.db_url = db_url
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        full = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
        full.update(
            PYTHONPATH=SRC, JOBTRAIL_DATABASE_URL=db_url, JOBTRAIL_WEBHOOK_SECRETS=f"pay={SECRET}"
        )
        full.update(env or {})
        if tokens is not None:
            full["JOBTRAIL_TOKENS"] = tokens
        self.log = tmp / f"serve-{self.port}.log"
        cmd = [sys.executable, "-m", "jobtrail", "serve", "--app", "httpapp:app"]
        self.proc = subprocess.Popen(
            [*cmd, "--port", str(self.port), *args],
            cwd=tmp,
            env=full,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        if wait:
            self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                if httpx.get(self.base + "/openapi.json", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("server did not answer: " + self.log.read_text())

    def rss(self) -> dict[str, int]:
        """The server's ``VmHWM`` (peak resident) and ``VmRSS`` in bytes."""
        found: dict[str, int] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmHWM", "VmRSS"):
                found[name] = int(value.split()[0]) * 1024
        return found

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serving(factory: Any, name: str) -> Iterator[Serve]:
    """A module's ``served`` fixture: ``Serve`` on a fresh SQLite file of its own, stopped after
    the module (``yield from serving(tmp_path_factory, "csrf")``)."""
    tmp = factory.mktemp(name)
    s = Serve(tmp, f"sqlite:///{tmp}/{name}.db")
    try:
        yield s
    finally:
        s.stop()


HOSTILE_QUEUE = "../tasks/17/cancel?"
HOSTILE_KIND = "boom&state=succeeded#x"
OTHER_TENANTS_QUEUE = "queue-of-tenant-b"


def seed_hostile(url: str) -> dict[str, str]:
    """17 queued tasks (the 17th is the target), a paused queue with the hostile name, a dead
    task of a hostile kind, and tasks of two tenants in queues of their own."""
    with jobtrail.App(url) as app:
        app.migrate()
        app.task("send")(lambda ctx, payload: None)

        @app.task(HOSTILE_KIND, max_attempts=1, queue="boomq")
        def boom(ctx: object, payload: object) -> None:
            raise jobtrail.PermanentError("no", category="invalid_input")

        ids = [app.enqueue("send", {"n": i}, delay=3600).id for i in range(17)]
        hostile = app.enqueue("send", {}, queue=HOSTILE_QUEUE, delay=3600)
        app.pause(HOSTILE_QUEUE, by="ops", note="maintenance")
        dead = app.enqueue(HOSTILE_KIND, {})
        app.run_worker(queues=["boomq"], burst=True)
        assert app.get(dead.id).state.value == "dead"
        mine = app.enqueue("send", {}, queue="queue-of-a", tenant="tenantA", delay=3600)
        app.enqueue("send", {}, queue=OTHER_TENANTS_QUEUE, tenant="tenantB", delay=3600)
        return {"target": ids[16], "hostile": hostile.id, "dead": dead.id, "mine": mine.id}
