"""``jobtrail demo``: the publish-note example on a fresh SQLite file, then every explanation.

Each note is published in three parts — upload images (a step), submit the body (an effect,
with the effect key as the platform's idempotency key), await the platform's receipt — against
a simulated platform whose ledger lives in files, so a second worker process sees it too. The
scenarios: a plain publish whose receipt arrives; an upstream timeout that recovers without
uploading twice; a revoked token (dead after one attempt); a cancel before start; a cancel
mid-run; a cancel too late (after the submission); a worker process killed with SIGKILL between
the platform accepting a submission and the worker recording it (reentrant: reconciled, never
submitted twice; non-reentrant: dead for a person to check); and a two-step workflow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..app import App
from ..core.context import Context
from ..model import i18n
from ..model.errors import PermanentError, TransientError
from ..model.machine import State


class Platform:
    """A stand-in for the note platform. Its ledger is a folder of files keyed by the
    idempotency key (created with O_EXCL), shared by every process of the demo."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "ledger").mkdir(parents=True, exist_ok=True)
        (folder / "uploads").mkdir(exist_ok=True)
        self._lock = threading.Lock()

    def upload(self, images: list[str]) -> list[str]:
        ids = []
        for name in images:
            with (self.folder / "uploads" / "log").open("a") as log:
                log.write(name + "\n")
            ids.append(f"img-{name}")
        return ids

    def submit(self, body: str, *, token: str, idempotency_key: str) -> dict[str, Any]:
        if token == "revoked":
            raise PermanentError("platform said 401: token revoked", category="unauthorized")
        safe = idempotency_key.replace("/", "_")
        if body.startswith("flaky") and not (self.folder / f"flaky_{safe}").exists():
            (self.folder / f"flaky_{safe}").touch()
            raise TransientError("platform timed out", category="timeout")
        path = self.folder / "ledger" / f"{safe}.json"
        with self._lock:
            if path.exists():  # the platform's own dedup by idempotency key
                return dict(json.loads(path.read_text()))
            receipt = {"id": f"receipt-{safe}", "body": body}
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(receipt))
        return receipt

    def lookup(self, idempotency_key: str) -> dict[str, Any] | None:
        """The ``reconcile`` hook: the receipt if the submission happened, else ``None``."""
        path = self.folder / "ledger" / f"{idempotency_key.replace('/', '_')}.json"
        return dict(json.loads(path.read_text())) if path.exists() else None

    def submissions(self) -> int:
        return len(list((self.folder / "ledger").iterdir()))

    def uploads(self) -> list[str]:
        log = self.folder / "uploads" / "log"
        return log.read_text().split() if log.exists() else []


def build_app(url: str, folder: Path) -> App:
    app = App(url, version="demo-1")
    platform = Platform(folder)
    gate = threading.Event()
    app.demo_platform = platform  # type: ignore[attr-defined]
    app.demo_gate = gate  # type: ignore[attr-defined]
    app.demo_events = []  # type: ignore[attr-defined]

    def publish(ctx: Context, payload: dict[str, Any], crash: bool = False) -> None:
        images = ctx.step("upload_images", lambda: platform.upload(payload.get("images", [])))
        if payload.get("wait_for_cancel"):  # a long render with safe boundaries
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                ctx.check_cancelled()
                gate.wait(0.02)

        def submit(key: str) -> dict[str, Any]:
            receipt = platform.submit(
                payload["body"], token=payload.get("token", "ok"), idempotency_key=key
            )
            if crash:  # accepted by the platform, then the worker dies before recording it
                (folder / f"{ctx.task_id}.submitted").touch()
                time.sleep(60)
            return receipt

        receipt = ctx.effect("submit_body", submit)
        if payload.get("hold_after_submit"):  # still running when a cancel arrives
            (folder / f"{ctx.task_id}.submitted").touch()
            gate.wait(10)
        ctx.emit("note.published", {"note": payload.get("note"), "images": len(images)})
        ctx.await_receipt(receipt["id"], timeout=60)

    app.task(
        "publish_note",
        backoff_base=0.05,
        backoff_cap=0.2,
        lease_seconds=2.0,
        reconcile=platform.lookup,
    )(publish)

    @app.task("publish_note_crash", lease_seconds=0.6, reconcile=platform.lookup)
    def publish_crash(ctx: Context, payload: dict[str, Any]) -> None:
        publish(ctx, payload, crash=ctx.attempt == 1)

    @app.task("publish_note_crash_once", lease_seconds=0.6, reentrant=False)
    def publish_crash_once(ctx: Context, payload: dict[str, Any]) -> None:
        publish(ctx, payload, crash=ctx.attempt == 1)

    @app.task("render_cover")
    def render_cover(ctx: Context, payload: dict[str, Any]) -> None:
        ctx.step("render", lambda: {"cover": f"{payload['note']}.png"})

    @app.sink("note.published")
    def on_published(message_id: int, topic: str, payload: Any) -> None:
        app.demo_events.append((message_id, payload))  # type: ignore[attr-defined]

    return app


def crash_worker_main(url: str, folder: str) -> None:
    """Entry point of the worker process the demo kills with SIGKILL."""
    app = build_app(url, Path(folder))
    app.run_worker(queues=["default"], concurrency=2, poll_interval=0.05)


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the demo timed out waiting for {what}")
        time.sleep(0.01)


def run(lang: str = "en", keep: str | None = None, out: Any = None) -> int:
    out = out or sys.stdout
    say = out.write

    def tr(key: str, **args: object) -> str:
        return i18n.t(key, lang, **args)

    workdir = Path(tempfile.mkdtemp(prefix="jobtrail-demo-"))
    path = Path(keep).resolve() if keep else workdir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    say(tr("demo.start", path=path) + "\n\n")
    app = build_app(url, workdir)
    platform: Platform = app.demo_platform  # type: ignore[attr-defined]
    gate: threading.Event = app.demo_gate  # type: ignore[attr-defined]
    app.migrate()
    ids: dict[str, str] = {}
    try:
        # 1. A worker process killed with SIGKILL after the platform accepted a submission but
        #    before the worker recorded the receipt.
        for name, kind in (
            ("crash_reentrant", "publish_note_crash"),
            ("crash_not_reentrant", "publish_note_crash_once"),
        ):
            ids[name] = app.enqueue(
                kind, {"note": name, "body": f"note {name}", "images": [f"{name}.jpg"]}
            ).id
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from jobtrail.cli.demo import crash_worker_main; "
                "crash_worker_main(sys.argv[1], sys.argv[2])",
                url,
                str(workdir),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait(
            lambda: (
                all(
                    (workdir / f"{ids[n]}.submitted").exists()
                    for n in ("crash_reentrant", "crash_not_reentrant")
                )
                or proc.poll() is not None
            ),
            "the worker process to submit",
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        say(tr("demo.killed", pid=proc.pid) + "\n")

        # 2. The everyday cases.
        ids["receipt_arrives"] = app.enqueue(
            "publish_note",
            {"note": "n1", "body": "hello", "images": ["n1-a.jpg", "n1-b.jpg"]},
            idempotency_key="note-1/publish",
        ).id
        again = app.enqueue(
            "publish_note",
            {"note": "n1", "body": "hello", "images": ["n1-a.jpg", "n1-b.jpg"]},
            idempotency_key="note-1/publish",
        )
        say(tr("demo.double_click", id=again.id, created=again.created) + "\n")
        ids["timeout_recovers"] = app.enqueue(
            "publish_note", {"note": "n2", "body": "flaky upstream", "images": ["n2-a.jpg"]}
        ).id
        ids["revoked_token"] = app.enqueue(
            "publish_note", {"note": "n3", "body": "x", "token": "revoked"}
        ).id
        ids["cancel_before_start"] = app.enqueue(
            "publish_note", {"note": "n4", "body": "later"}, delay=3600
        ).id
        result = app.cancel(ids["cancel_before_start"], by="alice", note="wrong note")
        say(tr("demo.cancel_before", outcome=result.outcome) + "\n")
        ids["cancel_mid_run"] = app.enqueue(
            "publish_note", {"note": "n5", "body": "long", "wait_for_cancel": True}
        ).id
        ids["cancel_too_late"] = app.enqueue(
            "publish_note", {"note": "n6", "body": "quick", "hold_after_submit": True}
        ).id
        ids["workflow"] = app.enqueue_workflow(
            "note_with_cover",
            [
                ("render_cover", {"note": "n7"}),
                ("publish_note", {"note": "n7", "body": "with cover"}),
            ],
            sequential=True,
        ).id

        # 3. A worker in this process; cancels while tasks run; the sweeper finds the crash.
        worker = threading.Thread(
            target=app.run_worker,
            kwargs=dict(concurrency=6, burst=True, poll_interval=0.05, sweep_interval=0.1),
        )
        worker.start()
        _wait(lambda: app.get(ids["cancel_mid_run"]).state is not State.QUEUED, "a claim")
        result = app.cancel(ids["cancel_mid_run"], by="bob", note="changed my mind")
        say(tr("demo.cancel_mid", outcome=result.outcome) + "\n")
        _wait(lambda: (workdir / f"{ids['cancel_too_late']}.submitted").exists(), "a submit")
        result = app.cancel(ids["cancel_too_late"], by="carol", note="stop it")
        say(tr("demo.cancel_late", outcome=result.outcome) + "\n")
        gate.set()
        worker.join()

        def settled() -> bool:
            app.sweep()
            app.run_worker(concurrency=6, burst=True, poll_interval=0.05, sweep_interval=0.1)
            for task in app.list(state="awaiting_receipt"):  # the platform calls back
                app.confirm_receipt(receipt_id=task.receipt_id, by="platform-webhook")
            return all(app.get(i).terminal for i in ids.values())

        _wait(settled, "every task to settle")
        result = app.cancel(ids["receipt_arrives"], by="dave", note="too late now")
        say(tr("demo.cancel_finished", outcome=result.outcome) + "\n")

        uploads = platform.uploads()
        say(
            "\n"
            + tr(
                "demo.nothing_twice",
                submissions=platform.submissions(),
                uploads=len(uploads),
                distinct=len(set(uploads)),
            )
            + "\n"
            if len(uploads) == len(set(uploads))
            else "\n" + tr("demo.uploaded_twice", uploads=sorted(uploads)) + "\n"
        )
        for name, task_id in ids.items():
            say("\n" + "=" * 100 + f"\n[{name}]\n")
            say(app.explain(task_id, lang=lang) + "\n")
        say("\n" + "=" * 100 + "\n" + tr("demo.summary") + "\n")
        for name, task_id in ids.items():
            task = app.get(task_id)
            row = tr(
                "demo.summary_row",
                name=name,
                id=task.id,
                state=task.state.value,
                reason=task.last_reason,
            )
            say(row + "\n")
        violations = app.check()
        result_text = tr("demo.clean") if not violations else violations
        say("\n" + tr("demo.check", result=result_text) + "\n")
        if keep:
            say(tr("demo.kept", path=path, url=url) + "\n")
        return 0 if not violations else 1
    finally:
        gate.set()
        app.close()
