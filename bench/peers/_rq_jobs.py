"""The job RQ's workers import by name (``_rq_jobs.noop``): a function of a module, not of
the driver script, which runs as ``__main__``."""

from __future__ import annotations

from _common import record_done, record_latency


def noop(t: float | None = None) -> None:
    record_latency(t)
    record_done()
