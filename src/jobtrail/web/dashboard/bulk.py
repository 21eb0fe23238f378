"""Bulk actions of the dashboard: cancel, replay or dismiss many tasks, each through its own
audited call (``App.cancel``, ``App.replay``, ``App.dismiss``) so every task gets its own
transition with the operator and note, in its own transaction.

A bulk action runs in a thread of the dashboard's process and its page shows its progress (a
selection can hold up to ``SELECTION_MAX`` tasks). The progress lives in this process only:
what each task went through is in its transition log, which outlives a restart; the page of a
bulk action started before the restart is gone (404).
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...app import App
from ...model.errors import IllegalTransition, TaskNotFound

ACTIONS = ("cancel", "replay", "dismiss")
#: each action's button (and name on its progress page) by its catalog key
ACTION_KEYS = {"cancel": "bulk.cancel", "replay": "bulk.replay", "dismiss": "bulk.dismiss"}
#: the bulk actions one process remembers (the oldest finished ones are forgotten first)
KEEP = 50
FAILURES_SHOWN = 50


@dataclass
class BulkJob:
    id: str
    action: str
    by: str
    note: str
    ids: list[str]
    tenant: str | None
    done: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)
    finished: bool = False

    @property
    def total(self) -> int:
        return len(self.ids)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "by": self.by,
            "note": self.note,
            "total": self.total,
            "done": self.done,
            "outcomes": dict(self.outcomes.most_common()),
            "failures": self.failures[:FAILURES_SHOWN],
            "finished": self.finished,
            "first_ids": self.ids[:20],
        }


class BulkJobs:
    """The bulk actions of one dashboard process, by id."""

    def __init__(self) -> None:
        self._jobs: dict[str, BulkJob] = {}
        self._lock = threading.Lock()
        self._seq = itertools.count(1)

    def start(
        self, app: App, action: str, ids: list[str], by: str, note: str, tenant: str | None
    ) -> BulkJob:
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}")
        job = BulkJob(
            id=f"{next(self._seq)}-{secrets.token_hex(4)}",
            action=action,
            by=by,
            note=note,
            ids=ids,
            tenant=tenant,
        )
        with self._lock:
            finished = [k for k, j in self._jobs.items() if j.finished]
            for k in finished[: max(0, len(self._jobs) - KEEP + 1)]:
                del self._jobs[k]
            self._jobs[job.id] = job
        threading.Thread(target=_run, args=(app, job), daemon=True, name="jobtrail-bulk").start()
        return job

    def get(self, job_id: str) -> BulkJob | None:
        with self._lock:
            return self._jobs.get(job_id)


def _one(app: App, job: BulkJob, task_id: str) -> str:
    """Act on one task; the outcome's code."""
    if job.tenant is not None and app.get(task_id).tenant != job.tenant:
        raise TaskNotFound(task_id)
    if job.action == "cancel":
        return app.cancel(task_id, by=job.by, note=job.note).outcome
    if job.action == "replay":
        app.replay(task_id, by=job.by, note=job.note)
        return "replayed"
    app.dismiss(task_id, by=job.by, note=job.note)
    return "dismissed"


def _run(app: App, job: BulkJob) -> None:
    for task_id in job.ids:
        try:
            outcome = _one(app, job, task_id)
        except TaskNotFound:
            outcome = "not_found"
        except IllegalTransition:
            outcome = "not_dead"
        except Exception as exc:  # noqa: BLE001 - one task's failure must not stop the rest
            outcome = "failed"
            job.failures.append((task_id, f"{type(exc).__name__}: {exc}"[:300]))
        job.outcomes[outcome] += 1
        job.done += 1
    job.finished = True
