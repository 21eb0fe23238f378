"""Words that match what happened: the dead-letter views — ``app.dead()``,
``GET /api/dead``, the dashboard's dead-letter page and ``jobtrail dead`` — show the last
error's text (its first line, bounded) beside its category, not the category alone (an
``unclassified`` group said nothing of what failed). Both backends."""

from __future__ import annotations

import html
from typing import Any

from fastapi.testclient import TestClient

import jobtrail
from jobtrail.cli.replays import dead_text
from jobtrail.web.server import create_app

from .support import run

READ = {"Authorization": "Bearer rd"}
LONG = "x" * 400


def _register(app: jobtrail.App) -> None:
    @app.task("sync_sku", max_attempts=1)
    def sync_sku(ctx: Any, payload: Any) -> None:
        raise KeyError(f"sku-{payload}")

    @app.task("report", max_attempts=1)
    def report(ctx: Any, payload: Any) -> None:
        raise RuntimeError(f"line one {LONG}\nline two must not show")


def test_the_dead_letter_views_show_the_last_error_beside_its_category(
    app: jobtrail.App,
) -> None:
    _register(app)
    app.enqueue("sync_sku", 1)
    run(app)
    newest = app.enqueue("sync_sku", 2)
    run(app)
    app.enqueue("report")
    run(app)

    for tasks in (0, 2):  # the groups' own form reads it too
        groups = {g["kind"]: g for g in app.dead(tasks=tasks)}
        sku = groups["sync_sku"]
        assert (sku["last_error_category"], sku["last_error"]) == (
            "unclassified",
            "KeyError: 'sku-2'",  # the newest death's
        )
        text = groups["report"]["last_error"]
        assert text.startswith("RuntimeError: line one xxx") and text.endswith("…")
        assert len(text) == 160 and "line two" not in text
    first, second = {g["kind"]: g for g in app.dead(tasks=2)}["sync_sku"]["tasks"]
    assert first["id"] == newest.id and first["error"] == "KeyError: 'sku-2'"
    assert second["error"] == "KeyError: 'sku-1'"

    out = dead_text(app.dead(tasks=1))
    assert out.splitlines()[0].split()[-2:] == ["LAST", "ERROR"]
    assert "unclassified: KeyError: 'sku-2'" in out.splitlines()[1] + out.splitlines()[2]
    task_line = next(line for line in out.splitlines() if f"task {newest.id} " in line)
    assert task_line.split()[2] == "unclassified"
    assert task_line.endswith("  error KeyError: 'sku-2'")
    assert "line two" not in out
    assert "最后的错误" in dead_text(app.dead(), "zh")

    with TestClient(create_app(app, tokens="rd:read")) as web:
        api = web.get("/api/dead?tasks=1", headers=READ)
        assert api.status_code == 200, api.text
        got = {g["kind"]: g for g in api.json()["groups"]}
        assert got["sync_sku"]["last_error"] == "KeyError: 'sku-2'"
        assert got["sync_sku"]["last_error_category"] == "unclassified"
        assert got["sync_sku"]["tasks"][0]["error"] == "KeyError: 'sku-2'"
        page = web.get("/dead?lang=en", headers=READ)
        assert page.status_code == 200
        body = html.unescape(page.text)
        assert "last error" in body
        assert "<code>unclassified</code> <span class=\"mono\">KeyError: 'sku-2'</span>" in body
        assert "line two" not in body
        assert "最后的错误" in web.get("/dead?lang=zh", headers=READ).text
