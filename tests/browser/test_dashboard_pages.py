"""The dashboard over plain HTTP (no browser): the rules a person relies on — actions only the
state allows, operator and note required, tenant-bound callers, cross-site posts refused, the
batch-replay preview touching exactly the previewed tasks — on SQLite and PostgreSQL."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from dashboard_seed import Seeded, Served, seed
from fastapi import HTTPException, Request

from jobtrail.model.machine import State


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def fetch(
    url: str, data: dict[str, str] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str, dict[str, str]]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    if body is not None:  # a form post from the dashboard's own page, as a browser sends it
        parts = urllib.parse.urlsplit(url)
        headers = {"Origin": f"{parts.scheme}://{parts.netloc}", **(headers or {})}
    req = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with OPENER.open(req, timeout=30) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


@pytest.fixture
def site(store: object) -> Iterator[tuple[str, Seeded]]:
    seeded = seed(store.app())  # type: ignore[attr-defined]
    served = Served(seeded.app)
    try:
        yield served.url, seeded
    finally:
        served.stop()


def test_pages_answer_and_actions_follow_the_state(site: tuple[str, Seeded]) -> None:
    url, s = site
    assert fetch(url + "/queues?window=60")[0] == 200
    assert fetch(url + "/queues?window=7")[0] == 422
    for path in (
        "/",
        "/queues",
        "/dead",
        "/cron",
        "/workers",
        "/static/htmx.min.js",
        "/?state=dead",
    ):
        assert fetch(url + path)[0] == 200, path
    status, js, headers = fetch(url + "/static/htmx.min.js")
    assert "htmx" in js and headers["content-type"].startswith("text/javascript")
    assert fetch(url + "/static/../routes.py")[0] == 404
    assert fetch(url + "/tasks/999999")[0] == 404
    assert fetch(url + "/tasks/abc")[0] == 404
    assert fetch(url + "/?state=bogus")[0] == 422
    assert fetch(url + f"/tasks/{s.dead}?lang=fr")[0] == 422
    for task_id in (s.succeeded, s.cancelled, s.parent):  # terminal: nothing to offer
        page = fetch(url + f"/tasks/{task_id}")[1]
        assert "cancel-form" not in page and "replay-form" not in page
    page = fetch(url + f"/tasks/{s.dead}")[1]
    assert "replay-form" in page and "cancel-form" not in page
    for task_id in (s.later, s.leased):
        page = fetch(url + f"/tasks/{task_id}")[1]
        assert "cancel-form" in page and "replay-form" not in page
    # every transition shows its code and its sentence, in both languages
    page = fetch(url + f"/tasks/{s.dead}?lang=zh")[1]
    assert "permanent_error" in page and "经过" in page
    # replaying a task that is not dead is refused and changes nothing
    status, page, _ = fetch(url + f"/tasks/{s.later}/replay", {"by": "x", "note": "y"})
    assert status == 409 and "queued" in page
    assert s.app.get(s.later).state is State.QUEUED
    # paging: `before` walks older tasks by id
    first = fetch(url + "/?before=5")[1]
    assert 'data-id="4"' in first and 'data-id="5"' not in first


def test_operator_and_note_are_required(site: tuple[str, Seeded]) -> None:
    url, s = site
    for path, data in (
        (f"/tasks/{s.leased}/cancel", {"by": "bob"}),
        (f"/tasks/{s.dead}/replay", {"note": "why"}),
        ("/queues/default/pause", {"by": "", "note": "x"}),
    ):
        status, page, _ = fetch(url + path, data)
        assert status == 422 and "required" in page, path
    assert s.app.get(s.leased).state is State.LEASED
    assert s.app.get(s.dead).state is State.DEAD
    assert not next(q for q in s.app.queues() if q["queue"] == "default")["paused"]
    # an outcome shown on the page comes from a fixed list, never from the URL's text
    page = fetch(url + f"/tasks/{s.dead}?done=<script>x</script>")[1]
    assert "<script>x" not in page and 'id="outcome"' not in page


def test_cancel_outcomes(site: tuple[str, Seeded]) -> None:
    url, s = site
    status, _, headers = fetch(url + f"/tasks/{s.later}/cancel", {"by": "bob", "note": "n"})
    assert status == 303 and "done=cancelled" in headers["location"]
    status, _, headers = fetch(url + f"/tasks/{s.leased}/cancel", {"by": "bob", "note": "n"})
    assert "done=cancel_requested" in headers["location"]
    page = fetch(url + headers["location"])[1]
    assert "cancel_requested" in page and "cancel-form" not in page


def test_cross_site_posts_are_refused(site: tuple[str, Seeded]) -> None:
    url, s = site
    evil = {"Origin": "http://evil.example"}
    status, _, _ = fetch(url + f"/tasks/{s.leased}/cancel", {"by": "b", "note": "n"}, evil)
    assert status == 403
    site_hdr = {"Sec-Fetch-Site": "cross-site"}
    assert fetch(url + "/queues/default/pause", {"by": "b", "note": "n"}, site_hdr)[0] == 403
    # what a browser sends after a cross-origin 307, and what another port of the same host sends
    for hdr in ({"Origin": "null"}, {"Sec-Fetch-Site": "same-site"}):
        assert fetch(url + f"/tasks/{s.leased}/cancel", {"by": "b", "note": "n"}, hdr)[0] == 403
    assert s.app.get(s.leased).state is State.LEASED


def test_preview_is_exactly_what_batch_replay_touches(site: tuple[str, Seeded]) -> None:
    url, s = site
    page = fetch(url + "/dead/preview?reason=permanent_error&kind=publish_note")[1]
    assert f">{s.dead}</a>" in page and f">{s.dead_other}</a>" not in page
    until = page.split('name="until" value="')[1].split('"')[0]
    # a task that dies after the preview is not touched by the confirmed replay
    late = s.app.enqueue("publish_note", {"body": "late", "fail": True})
    s.app.run_worker(queues=["default"], burst=True)
    assert s.app.get(late.id).state is State.DEAD
    form = {
        "reason": "permanent_error",
        "kind": "publish_note",
        "since": "",
        "until": until,
        "limit": "1",
        "per_second": "50",
        "by": "erin",
        "note": "fixed",
    }
    status, page, _ = fetch(url + "/dead/replay", form)
    assert status == 200 and f">{s.dead}</a>" in page
    assert s.app.get(s.dead).state is State.QUEUED
    assert s.app.get(late.id).state is State.DEAD
    # durations ago work as time inputs; nonsense is a clear 422
    assert fetch(url + "/dead/preview?since=2h")[0] == 200
    assert fetch(url + "/dead/preview?since=yesterday-ish")[0] == 422


def test_tenant_bound_callers_see_only_their_tasks(store: object) -> None:
    seeded = seed(store.app())  # type: ignore[attr-defined]

    def authorize(request: Request, action: str) -> str | None:
        token = request.headers.get("authorization", "")
        if token == "Bearer acme-read":
            if action != "read":
                raise HTTPException(403, "read-only token")
            return "acme"
        if token == "Bearer admin":
            return None
        raise HTTPException(401, "a token is required")

    served = Served(seeded.app, authorize=authorize)
    try:
        url = served.url
        acme = {"Authorization": "Bearer acme-read"}
        assert fetch(url + "/")[0] == 401
        page = fetch(url + "/", headers=acme)[1]
        assert f'data-id="{seeded.tenant_task}"' in page
        assert f'data-id="{seeded.succeeded}"' not in page and 'id="counts"' not in page
        assert fetch(url + f"/tasks/{seeded.tenant_task}", headers=acme)[0] == 200
        assert fetch(url + f"/tasks/{seeded.succeeded}", headers=acme)[0] == 404
        assert fetch(url + "/queues", headers=acme)[0] == 403
        assert fetch(url + "/dead", headers=acme)[0] == 403
        data = {"by": "x", "note": "y"}
        assert fetch(url + f"/tasks/{seeded.tenant_task}/cancel", data, acme)[0] == 403
        admin = {"Authorization": "Bearer admin"}
        assert fetch(url + "/queues", headers=admin)[0] == 200
        assert fetch(url + f"/tasks/{seeded.later}/cancel", data, admin)[0] == 303
    finally:
        served.stop()


def test_module_entry_serves_the_dashboard(tmp_path: object) -> None:
    import os
    import socket
    import subprocess
    import sys
    import time

    import jobtrail

    url = f"sqlite:///{tmp_path}/d.db"
    with jobtrail.App(url) as app:
        app.migrate()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    src = os.path.join(os.path.dirname(jobtrail.__file__), "..")
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    cmd = [sys.executable, "-m", "jobtrail", "dashboard", "--db", url, "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, page, _ = fetch(f"http://127.0.0.1:{port}/cron")
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        assert status == 200 and "No schedules" in page
    finally:
        proc.terminate()
        proc.wait(10)
    refused = subprocess.run([*cmd, "--host", "0.0.0.0"], env=env, capture_output=True, text=True)
    assert refused.returncode != 0 and "loopback" in refused.stderr


def test_dead_letters_show_evidence_effects_and_replay_runs(site: tuple[str, Seeded]) -> None:
    """Dead-letter evidence on the dead-letter page: each group's and task's evidence, the effects a
    replay performs again or skips in the preview, and the recorded replay runs."""
    url, s = site
    page = fetch(url + "/dead")[1]
    groups = [g.split("</tr>")[0] for g in page.split('class="dead-group"')[1:]]
    [group] = [g for g in groups if "<td>publish_note</td>" in g]
    assert "<td>unauthorized</td>" in group and "<td>1</td>" in group
    row = page.split(f'class="evidence" data-task="{s.dead}"')[1].split("</tr>")[0]
    assert "unauthorized" in row and "1/1" in row and "p-1" in row and "sha256:" in row
    assert "bye" not in page  # the payload is never shown, only its hash
    assert "No replay run yet." in page
    preview = fetch(url + "/dead/preview?kind=publish_note")[1]
    effects = preview.split(f'class="preview-effects" data-task="{s.dead}"')[1].split("</tr>")[0]
    skip = effects.split('class="skip"')[1]
    assert "<code>submit_body</code>" in skip and "(p-1)" in skip
    assert "upload_images" not in effects  # a step is not an effect
    assert '<td class="again"><span class="muted">-</span>' in effects
    until = preview.split('name="until" value="')[1].split('"')[0]
    form = {"reason": "", "kind": "publish_note", "since": "", "until": until, "limit": "1",
            "per_second": "50", "by": "erin", "note": "token renewed"}  # fmt: skip
    assert fetch(url + "/dead/replay", form)[0] == 200
    page = fetch(url + "/dead")[1]
    run = page.split('class="replay-run"')[1].split("</tr>")[0]
    assert 'data-state="completed"' in run and "erin" in run and "token renewed" in run
    assert "kind=publish_note" in run and "1/1" in run
    assert f'data-run="{s.app.replay_runs()[0]["id"]}"' in page
    zh = fetch(url + "/dead?lang=zh")[1]
    assert "重放批次" in zh and "已完成" in zh and "首次 / 末次失败" in zh
