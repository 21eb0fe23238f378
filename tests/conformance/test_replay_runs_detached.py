"""Replay runs, issue 19, on both backends: a replay run started from the dashboard or
``POST /api/replay-runs`` is *detached*. The request takes its first step and answers; the
sweep of a real worker carries it on batch by batch, with the same stop conditions as a run
from the CLI (``stop_after_failures``, the batch timeout); its progress is visible in the
dashboard's and the API's run lists; and it needs no process of its own (a worker started
after the server that started the run finishes it)."""

from __future__ import annotations

import re
from typing import Any

import jobtrail
from jobtrail.model.models import iso

from ._http_support import auth, client
from .support import run, wait_for
from .test_replay_runs import _boom_kinds, running_worker

ADM, RD = auth("adm"), auth("rd")
#: What a same-origin browser sends with a form post (the dashboard refuses others).
FORM = {**ADM, "Origin": "http://testserver"}


def _dead(app: jobtrail.App, n: int) -> list[str]:
    ids = [app.enqueue("boom", {"n": i}).id for i in range(n)]
    run(app)
    assert all(app.get(i).state == "dead" for i in ids)
    return ids


def _form(app: jobtrail.App, **fields: Any) -> dict[str, str]:
    """The preview's confirm form, as the dashboard renders it (``until`` frozen by it)."""
    until = iso(app.dead_preview(kind="boom")["until"])
    base = {"reason": "", "kind": "boom", "since": "", "until": until, "limit": "100"}
    return {**base, **{k: str(v) for k, v in fields.items()}}


def _run(web: Any, run_id: int) -> dict[str, Any]:
    runs = web.get("/api/replay-runs", headers=RD).json()["runs"]
    [found] = [r for r in runs if r["id"] == run_id]
    return dict(found)


def test_a_dashboard_run_goes_on_batch_by_batch_and_stops_when_its_tasks_die_again(
    app: jobtrail.App,
) -> None:
    _boom_kinds(app, {"yes": False})
    ids = _dead(app, 12)
    web = client(app)
    with running_worker(app):
        page = web.post(
            "/dead/replay",
            data=_form(
                app,
                batch_size=3,
                stop_after_failures=5,
                per_second="",
                by="erin",
                note="provider fixed?",
                batch_timeout=20,
            ),  # fmt: skip
            headers=FORM,
        )
        assert page.status_code == 200, page.text
        # the request replayed the first batch and answered: the run goes on without it
        assert 'id="replay-run"' in page.text and page.text.count('class="state s-') == 3
        run_id = int(page.text.split('id="replay-run" data-run="')[1].split('"')[0])
        assert 'data-state="running"' in page.text and "Batch replay started" in page.text
        record = wait_for(
            lambda: (r := _run(web, run_id))["state"] != "running" and r,
            timeout=30,
            what="the workers to carry the run to its stop",
        )
    # the same outcome as test_replay_runs' CLI-driven run: two batches, then the stop
    assert (record["state"], record["stop_code"]) == ("stopped", "died_again")
    assert (record["total"], record["replayed"], record["batches"]) == (12, 6, 2)
    assert record["died_again"] >= 5 and record["detached"] is True
    assert record["stop_reason"] == f"{record['died_again']} of 6 replayed tasks died again"
    assert record["stopped_by"].startswith("sweeper@") and record["driver"] == record["stopped_by"]
    assert (record["by"], record["note"]) == ("erin", "provider fixed?")
    assert sum(app.get(i).state == "dead" and app.get(i).replay_count == 0 for i in ids) == 6
    # the dashboard's list shows it: state, replayed/total, batches, died again, driver, outcome
    listing = web.get("/dead", headers=RD).text
    row = listing.split(f'data-run="{run_id}"')[1].split("</tr>")[0]
    assert 'data-state="stopped"' in row and '<td class="progress">6/12</td>' in row
    assert '<td class="batches">2</td>' in row and "the workers" in row
    assert record["stop_reason"] in row or "died again" in row


def test_an_api_run_paces_itself_and_completes_batch_by_batch(app: jobtrail.App) -> None:
    healed = {"yes": True}
    _boom_kinds(app, healed)
    healed["yes"] = False
    ids = _dead(app, 5)
    healed["yes"] = True
    web = client(app)
    body = {"kind": "boom", "by": "ops", "note": "fixed", "batch_size": 2,
            "stop_after_failures": 1, "per_second": 20, "batch_timeout": 20}  # fmt: skip
    with running_worker(app):
        started = web.post("/api/replay-runs", json=body, headers=ADM)
        assert started.status_code == 202, started.text
        first = started.json()
        assert first["state"] == "running" and first["detached"] is True
        assert len(first["touched"]) == 2 and first["replayed"] == 2 and first["batches"] == 1
        seen: set[tuple[int, int]] = set()

        def done() -> dict[str, Any] | None:
            r = _run(web, first["id"])
            seen.add((r["replayed"], r["batches"]))
            return r if r["state"] != "running" else None

        record = wait_for(done, timeout=30, what="the workers to complete the run")
        wait_for(lambda: all(app.get(i).state == "succeeded" for i in ids), timeout=10)
    assert (record["state"], record["stop_code"], record["stop_reason"]) == (
        "completed",
        None,
        None,
    )
    assert (record["replayed"], record["batches"], record["died_now"]) == (5, 3, 0)
    assert (2, 1) in seen  # the list showed the run between its batches
    assert record["filter"]["per_second"] == 20
    # bad input is refused, naming what is wrong, and records nothing
    count = len(web.get("/api/replay-runs", headers=RD).json()["runs"])
    for bad, word in [
        ({**body, "stop_after_failures": 2, "batch_size": None}, "stop_after_failures"),
        ({**body, "batch_size": 0}, "batch_size"),
        ({**body, "per_second": 0}, "per_second"),
        ({**body, "batch_timeout": 0}, "batch_timeout"),
        ({**body, "since": "yesterday-ish"}, "since"),
        ({"by": "ops", "note": "n"}, "filter"),
    ]:
        refused = web.post("/api/replay-runs", json=bad, headers=ADM)
        assert refused.status_code == 422 and word in refused.text, (bad, refused.text)
    assert len(web.get("/api/replay-runs", headers=RD).json()["runs"]) == count
    assert web.post("/api/replay-runs", json=body, headers=RD).status_code == 403
    bad_form = web.post(
        "/dead/replay", data=_form(app, batch_size="three", by="e", note="n"), headers=FORM
    )
    assert bad_form.status_code == 422 and "batch_size must be a number" in bad_form.text
    assert len(web.get("/api/replay-runs", headers=RD).json()["runs"]) == count


def test_a_detached_run_needs_no_process_of_its_own(store: Any) -> None:
    """Started by one App (the server) with no worker running; that App goes away; a worker
    of another App started afterwards carries the run on. A batch that cannot settle (its
    tasks' queue has no worker) stops the run at its batch timeout, whoever sweeps."""
    later = store.app()  # migrates; the store's check runs through it at the end
    server = jobtrail.App(store.url, **store.options)
    _boom_kinds(server, {"yes": False})
    ids = _dead(server, 4)
    started = server.start_replay_run(kind="boom", by="ops", note="n", batch_size=2)
    assert (started["replayed"], started["state"]) == (2, "running")
    server.close()

    _boom_kinds(later, {"yes": True})
    with running_worker(later):
        record = wait_for(
            lambda: (r := later.replay_runs(run_id=started["id"])[0])["state"] != "running" and r,
            timeout=30,
            what="a later worker to finish the run",
        )
        # the run completes once its last batch is replayed; that batch still needs the
        # worker (woken by NOTIFY, or by its poll behind a transaction pooler)
        wait_for(lambda: all(later.get(i).state == "succeeded" for i in ids), timeout=10)
    assert (record["state"], record["replayed"], record["batches"]) == ("completed", 4, 2)

    # a run whose batch cannot settle: the sweep of a worker on another queue stops it
    _dead_in(later, "stuck", 3)
    parked = later.start_replay_run(kind="stuck", by="ops", note="n", batch_size=1,
                                    batch_timeout=0.5)  # fmt: skip
    assert parked["replayed"] == 1
    with running_worker(later, queues=["elsewhere"]):
        record = wait_for(
            lambda: (r := later.replay_runs(run_id=parked["id"])[0])["state"] != "running" and r,
            timeout=30,
            what="the sweep to stop the run at its batch timeout",
        )
    assert (record["state"], record["stop_code"], record["replayed"]) == (
        "stopped",
        "not_settled",
        1,
    )
    assert "batch 1 had not settled within 0.5 s" in record["stop_reason"]


def _dead_in(app: jobtrail.App, kind: str, n: int) -> list[str]:
    @app.task(kind, max_attempts=1)
    def fails(ctx: Any, payload: Any) -> None:
        raise jobtrail.PermanentError("no", category="invalid_input")

    ids = [app.enqueue(kind, {"n": i}).id for i in range(n)]
    run(app)
    assert all(app.get(i).state == "dead" for i in ids)
    return ids


def test_a_detached_run_no_worker_carries_on_says_so(app: jobtrail.App) -> None:
    """With no worker running nothing steps a detached run: after ``UNATTENDED_AFTER`` seconds
    without a step its record says how long (``unattended_for``) and its outcome, in the API,
    the dashboard and the CLI's words, that it waits for a worker. A sweep's step clears it."""
    from jobtrail.cli.replays import runs_text
    from jobtrail.core.replays import UNATTENDED_AFTER

    from .support import raw

    _dead_in(app, "parked", 2)
    started = app.start_replay_run(kind="parked", by="ops", note="n", batch_size=1)
    assert (started["state"], started["unattended_for"]) == ("running", None)
    assert app.replay_runs(run_id=started["id"])[0]["unattended_for"] is None  # just stepped

    # the last step 60 s ago, by the database clock
    if app._driver.dialect == "postgres":
        raw(app, "UPDATE jobtrail_replay_runs SET heartbeat_at = now() - interval '60 seconds'")
    else:
        raw(app, "UPDATE jobtrail_replay_runs SET heartbeat_at = heartbeat_at - 60")
    [record] = app.replay_runs(run_id=started["id"])
    assert record["state"] == "running" and record["unattended_for"] is not None
    assert 60 <= record["unattended_for"] < 60 + UNATTENDED_AFTER
    words = "running, but no worker has taken a step for 60 s"
    assert words in runs_text([record])
    assert "已有 60 秒没有 worker 推进它" in runs_text([record], "zh")
    web = client(app)
    assert record["unattended_for"] <= _run(web, started["id"])["unattended_for"] < 70
    page = web.get("/dead", headers=RD)
    assert page.status_code == 200
    assert re.search(r"running, but no worker has taken a step for 6\d s", page.text)

    # an attached run is its caller's to beat, and a stopped one waits for nothing
    assert jobtrail.core.replays.unattended_for(False, "running", 60.0) is None
    assert jobtrail.core.replays.unattended_for(True, "stopped", 60.0) is None

    app.sweep()  # a worker's sweep takes the next step
    [record] = app.replay_runs(run_id=started["id"])
    assert record["unattended_for"] is None and words not in runs_text([record])
