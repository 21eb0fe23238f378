"""The serial-per-key line of an explanation: a queued task with a concurrency key that its
key holds back says so — "key account:42 has 1 of 1 running (task 17)", or how many of the
key's tasks are queued before it (a key's tasks start in due order)."""

from __future__ import annotations

from ..model import i18n
from ..store.base import Driver, Row, Tx


def key_facts(driver: Driver, tx: Tx, row: Row, lang: str) -> list[str]:
    """Why the queued ``row`` waits for its concurrency key (nothing when it has none, or
    when its key has room for it)."""
    key = row.get("ckey")
    if row["state"] != "queued" or key is None:
        return []
    limit = row.get("concurrency_limit") or 1
    holders = driver.key_holders(tx, queue=row["queue"], tenant=row["tenant"], key=key)
    ahead = driver.key_ahead_count(
        tx,
        queue=row["queue"],
        tenant=row["tenant"],
        key=key,
        run_at=driver.encode_time(row["run_at"]),
        id=row["id"],
    )
    before = ahead["n"] if ahead else 0
    if len(holders) + before < limit:
        return []
    out = []
    if holders:
        ids = [str(h["id"]) for h in holders]
        tasks = (
            i18n.t("explain.key_task", lang, id=ids[0])
            if len(ids) == 1
            else i18n.t("explain.key_tasks", lang, ids=", ".join(ids[:5]))
        )
        out.append(
            i18n.t("explain.key_full", lang, key=key, n=len(holders), limit=limit, tasks=tasks)
        )
    if before:
        out.append(i18n.t("explain.key_ahead", lang, key=key, n=before))
    return out
