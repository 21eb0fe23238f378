"""``jobtrail demo``: the publish-note example on a fresh SQLite file, then every explanation.

A simulated external platform runs in this process and keeps its own ledger keyed by the
idempotency key jobtrail hands it, so the demo can show that nothing was published twice.
Scenarios: a plain publish; an upstream that times out once and recovers; a revoked token
(dead after one attempt, no retry); a cancel before start; a cancel mid-run; and a real worker
process killed with SIGKILL mid-publish — a reentrant kind is requeued and finished, a
non-reentrant kind goes to ``dead`` (effect uncertain) for a person to check.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .app import App
from .context import Context
from .errors import PermanentError, TransientError
from .machine import State


class Platform:
    """A stand-in for the note platform: a ledger of accepted submissions by idempotency key."""

    def __init__(self) -> None:
        self.ledger: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self._flaky_seen: set[str] = set()
        self._lock = threading.Lock()

    def submit(self, body: str, *, token: str, idempotency_key: str) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            if token == "revoked":
                raise PermanentError("platform said 401: token revoked", category="unauthorized")
            if body.startswith("flaky") and idempotency_key not in self._flaky_seen:
                self._flaky_seen.add(idempotency_key)
                raise TransientError("platform timed out", category="timeout")
            if idempotency_key in self.ledger:  # the provider's own dedup by key
                return self.ledger[idempotency_key]
            receipt = {"id": f"r-{len(self.ledger) + 1}", "body": body}
            self.ledger[idempotency_key] = receipt
            return receipt


def build_app(url: str, platform: Platform | None = None, markers: Path | None = None) -> App:
    app = App(url, version="demo-1")
    platform = platform or Platform()
    gate = threading.Event()
    app.demo_platform = platform  # type: ignore[attr-defined]
    app.demo_gate = gate  # type: ignore[attr-defined]

    @app.task("publish_note", backoff_base=0.05, backoff_cap=0.2, lease_seconds=2.0)
    def publish_note(ctx: Context, payload: dict[str, Any]) -> None:
        if payload.get("wait_for_cancel"):
            # a long render: the handler looks for a cancel at each safe boundary
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                ctx.check_cancelled()
                gate.wait(0.02)
        platform.submit(
            payload["body"],
            token=payload.get("token", "ok"),
            idempotency_key=f"{ctx.task_id}/submit",
        )

    def crashing(ctx: Context, payload: dict[str, Any]) -> None:
        if markers is not None and not (markers / f"{ctx.task_id}.ran").exists():
            (markers / f"{ctx.task_id}.ran").touch()
            time.sleep(60)  # killed here by the demo, mid-publish
        platform.submit(payload["body"], token="ok", idempotency_key=f"{ctx.task_id}/submit")

    app.task("publish_crash_reentrant", lease_seconds=0.6, reentrant=True)(crashing)
    app.task("publish_crash_once", lease_seconds=0.6, reentrant=False)(crashing)
    return app


def crash_worker_main(url: str, markers: str) -> None:
    """Entry point of the worker process the demo kills with SIGKILL."""
    app = build_app(url, markers=Path(markers))
    app.run_worker(queues=["default"], concurrency=2, poll_interval=0.05)


def run(lang: str = "en", keep: str | None = None, out: Any = None) -> int:
    out = out or sys.stdout
    workdir = Path(tempfile.mkdtemp(prefix="jobtrail-demo-"))
    path = Path(keep).resolve() if keep else workdir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    say = out.write
    say(f"jobtrail demo — a fresh SQLite store at {path}\n\n")
    platform = Platform()
    app = build_app(url, platform, markers=workdir)
    app.migrate()
    ids: dict[str, str] = {}
    try:
        # 1. A worker process that will be killed with SIGKILL mid-publish.
        for kind in ("publish_crash_reentrant", "publish_crash_once"):
            ids[kind] = app.enqueue(kind, {"body": f"note via {kind}"}).id
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from jobtrail.demo import crash_worker_main; "
                "crash_worker_main(sys.argv[1], sys.argv[2])",
                url,
                str(workdir),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not all(
            (workdir / f"{ids[k]}.ran").exists()
            for k in ("publish_crash_reentrant", "publish_crash_once")
        ):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the demo's worker process did not start its tasks")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        say(f"killed worker process {proc.pid} with SIGKILL in the middle of two publishes\n")

        # 2. The everyday cases.
        ids["plain"] = app.enqueue(
            "publish_note", {"body": "hello world"}, idempotency_key="note-1/publish"
        ).id
        again = app.enqueue(
            "publish_note", {"body": "hello world"}, idempotency_key="note-1/publish"
        )
        say(
            f"double click: the same key returned task {again.id} again (created={again.created})\n"
        )
        ids["flaky"] = app.enqueue("publish_note", {"body": "flaky upstream"}).id
        ids["revoked"] = app.enqueue("publish_note", {"body": "x", "token": "revoked"}).id
        ids["cancel_before"] = app.enqueue("publish_note", {"body": "later"}, delay=3600).id
        result = app.cancel(ids["cancel_before"], by="alice", note="wrong note")
        say(f"cancel before start: {result.outcome}\n")
        ids["cancel_mid"] = app.enqueue(
            "publish_note", {"body": "long", "wait_for_cancel": True}
        ).id

        # 3. Run a worker here; cancel the long one once it is running; sweep the dead lease.
        worker = threading.Thread(
            target=app.run_worker,
            kwargs=dict(concurrency=4, burst=True, poll_interval=0.05, sweep_interval=0.1),
        )
        worker.start()
        deadline = time.monotonic() + 30
        while app.get(ids["cancel_mid"]).state is State.QUEUED and time.monotonic() < deadline:
            time.sleep(0.01)
        result = app.cancel(ids["cancel_mid"], by="bob", note="changed my mind")
        say(f"cancel mid-run: {result.outcome}\n")
        worker.join()
        deadline = time.monotonic() + 30
        while any(not app.get(i).terminal for i in ids.values()) and time.monotonic() < deadline:
            app.sweep()
            app.run_worker(concurrency=4, burst=True, poll_interval=0.05, sweep_interval=0.1)
            time.sleep(0.05)

        say(
            f"\nthe platform accepted {len(platform.ledger)} submissions "
            f"({platform.calls} calls); no key was accepted twice\n"
        )
        for name, task_id in ids.items():
            say("\n" + "=" * 100 + f"\n[{name}]\n")
            say(app.explain(task_id, lang=lang) + "\n")
        violations = app.check()
        say(f"\ninvariant check: {'clean' if not violations else violations}\n")
        if keep:
            say(f"the database is kept at {path}: try `jobtrail list --db {url}`\n")
        return 0 if not violations else 1
    finally:
        app.close()
