"""Results on the dashboard's task page, both backends: the result of a succeeded task, the
raising frame of each failure and its whole traceback on demand (a <details>), en and zh,
and the wording of results and failures in the timeline."""

from __future__ import annotations

import html
import re
from pathlib import Path

from fastapi.testclient import TestClient

import jobtrail
from jobtrail.web.server import create_app

from .support import drain

HERE = Path(__file__).resolve()
READ = {"Authorization": "Bearer rd"}


def test_the_task_page_shows_the_result_and_the_traceback(app: jobtrail.App) -> None:
    @app.task("k", backoff_base=0.001, backoff_cap=0.001)
    def k(ctx, p):
        if ctx.attempt == 1:
            return {}["missing"]  # the dashboard points here
        return {"sent": 3, "to": "<ops>"}

    task_id = app.enqueue("k").id
    drain(app, task_id)
    line = next(
        n
        for n, text in enumerate(HERE.read_text(encoding="utf-8").splitlines(), 1)
        if "the dashboard points here" in text and "next(" not in text
    )
    with TestClient(create_app(app, tokens="rd:read")) as web:
        page = web.get(f"/tasks/{task_id}?lang=en", headers=READ)
        assert page.status_code == 200
        body = page.text
        result = re.search(r'<pre id="result">(.*?)</pre>', body, re.S)
        assert result is not None
        assert '"to": "<ops>"' in html.unescape(result.group(1))  # escaped in the page
        assert "<ops>" not in result.group(1)
        assert f'raised at <code class="frame">{HERE}:{line}</code>' in body
        details = re.search(r'<details class="traceback">(.*?)</details>', body, re.S)
        assert details is not None
        text = html.unescape(details.group(1))
        assert "<code>builtins.KeyError</code>" in text
        assert "Traceback (most recent call last):" in text and "KeyError: 'missing'" in text
        assert "unclassified error, retried by default" in body
        assert "transient" not in body
        zh = web.get(f"/tasks/{task_id}?lang=zh", headers=READ).text
        assert f'出错位置 <code class="frame">{HERE}:{line}</code>' in zh
        assert "<summary>调用栈" in zh and "<dt>结果</dt>" in zh
        assert "未分类的错误，默认重试" in zh


def test_a_task_without_a_result_or_failure_shows_neither(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task_id = app.enqueue("k").id
    drain(app, task_id)
    with TestClient(create_app(app, tokens="rd:read")) as web:
        body = web.get(f"/tasks/{task_id}", headers=READ).text
    assert 'id="result"' not in body and 'class="traceback"' not in body
    assert "finished" in body and "side effect" not in body
