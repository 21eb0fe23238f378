"""``jobtrail workers``: the live workers, one line each, from their heartbeat
rows (``app.workers()``).

Registered on the ``jobtrail`` group by importing this module (``cli/__init__.py`` does).
"""

from __future__ import annotations

from ..model import i18n
from ..model.models import Worker
from . import format as fmt
from .base import Runtime, lang_option, verb

HEADERS = (
    "cli.h_worker",
    "cli.h_host",
    "cli.h_pid",
    "cli.h_version",
    "cli.h_queues",
    "cli.h_kinds",
    "cli.h_concurrency",
    "cli.h_started",
    "cli.h_last_seen",
    "cli.h_holds",
)
#: Task ids printed per worker; the rest are counted.
SHOWN_TASKS = 8


def holds(worker: Worker) -> str:
    if not worker.tasks:
        return "-"
    shown = ",".join(worker.tasks[:SHOWN_TASKS])
    more = len(worker.tasks) - SHOWN_TASKS
    return f"{len(worker.tasks)}: {shown}" + (f",+{more}" if more > 0 else "")


def workers_text(listed: list[Worker], lang: str) -> str:
    if not listed:
        return i18n.t("cli.no_workers", lang)
    return fmt.table(
        [i18n.t(key, lang) for key in HEADERS],
        [
            [
                w.id,
                w.host,
                str(w.pid),
                w.version or "-",
                ",".join(w.queues) or "-",
                ",".join(w.kinds) or "-",
                str(w.concurrency),
                fmt.when(w.started_at),
                fmt.when(w.last_seen_at),
                holds(w),
            ]
            for w in listed
        ],
    )


@verb("workers")
@lang_option
def workers(rt: Runtime, lang: str) -> None:
    """The live workers: owner id, host, pid, code version, queues, kinds they register,
    concurrency, started, last heartbeat and the tasks they hold. A stopped worker is not
    listed; one that died without stopping is forgotten a minute after its last heartbeat."""
    listed = rt.app().workers()
    rt.emit([w.to_dict() for w in listed], workers_text(listed, lang))
