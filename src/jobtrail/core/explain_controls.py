"""Live facts of the controls of enqueue for an explanation (``explain_facts.gather``): how
often a queued task was debounced and when it runs (at the latest), and when it expires."""

from __future__ import annotations

from ..model import i18n
from ..model.machine import State
from ..model.models import iso
from ..store.base import Driver, Row, Tx


def lines(driver: Driver, tx: Tx, row: Row, lang: str) -> list[str]:
    """The controls' sentences for a task's row (none unless it is queued)."""
    if row["state"] != State.QUEUED:
        return []
    out: list[str] = []
    if row.get("debounce_key") is not None:
        n = driver.task_debounce_count(tx, row["id"])
        times = i18n.t("explain.once", lang) if n == 1 else i18n.t("explain.times", lang, n=n)
        latest = row.get("debounce_until")
        if latest is not None:
            out.append(
                i18n.t(
                    "explain.debounced_latest",
                    lang,
                    times=times,
                    at=iso(row["run_at"]),
                    latest=iso(latest),
                )
            )
        else:
            out.append(i18n.t("explain.debounced", lang, times=times, at=iso(row["run_at"])))
    if row.get("expires_at") is not None:
        out.append(i18n.t("explain.expires", lang, at=iso(row["expires_at"])))
    return out
