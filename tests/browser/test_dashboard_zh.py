"""The dashboard in Chinese (issue 17 item 6): the language link sets a ``lang`` cookie that
sticks across pages, ``Accept-Language`` picks the default, ``<html lang>`` follows, the task
page's explanation speaks the same language — in a real Chromium (its own module, so its own
browser profile and cookies) and over plain HTTP, on SQLite and PostgreSQL.

The Chinese screenshot is saved to the test's tmp dir (and to ``test-artifacts/screenshots/``);
it needs a CJK font (``fonts-noto-cjk``, which ``.ci/run`` installs): without one under
``CI=true`` the test fails, elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import (
    IN_CI,
    browser_fixture,  # noqa: F401  (provides the `browser` fixture)
)
from dashboard_seed import Seeded, Served, seed
from test_dashboard_pages import fetch

from jobtrail.model import i18n

SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture
def site(store: object) -> Iterator[tuple[str, Seeded, str]]:
    seeded = seed(store.app())  # type: ignore[attr-defined]
    served = Served(seeded.app)
    try:
        yield served.url, seeded, store.backend  # type: ignore[attr-defined]
    finally:
        served.stop()


def _require_cjk_font() -> None:
    fonts = subprocess.run(["fc-list"], capture_output=True, text=True).stdout
    if "Noto Sans CJK" not in fonts:
        reason = "no CJK font for the screenshot: apt-get install -y fonts-noto-cjk"
        if IN_CI:
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)


def _css(driver: object, selector: str) -> object:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 10).until(  # type: ignore[arg-type]
        lambda d: d.find_element("css selector", selector)  # type: ignore[attr-defined]
    )


def _until(driver: object, condition: Callable[[Any], bool]) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(condition)  # type: ignore[arg-type]


def _html_lang(driver: object) -> str:
    return str(_css(driver, "html").get_attribute("lang"))  # type: ignore[attr-defined]


@pytest.mark.browser
def test_chinese_sticks_across_pages(
    browser: object, site: tuple[str, Seeded, str], tmp_path: Path
) -> None:
    _require_cjk_font()
    url, s, backend = site
    d = browser
    d.get(url + "/?lang=en")  # type: ignore[attr-defined]
    assert _html_lang(d) == "en" and _css(d, "h1").text == "Tasks"  # type: ignore[attr-defined]
    # the switch: a plain same-origin link (no script), then every page is Chinese
    switch = _css(d, "#lang-switch")
    assert switch.text == "中文"  # type: ignore[attr-defined]
    switch.click()  # type: ignore[attr-defined]
    _css(d, "#task-list")
    assert _html_lang(d) == "zh"
    assert _css(d, "h1").text == "任务"  # type: ignore[attr-defined]
    header = _css(d, "header").text  # type: ignore[attr-defined]
    for key in ("nav.tasks", "nav.queues", "nav.dead", "nav.cron"):
        assert i18n.t(key, "zh") in header
    columns = _css(d, "#task-list tr").text  # type: ignore[attr-defined]
    assert "编号" in columns and "状态" in columns and "state" not in columns
    q = _css(d, "#f-q").get_attribute("placeholder")  # type: ignore[attr-defined]
    assert q == i18n.t("search.placeholder", "zh")
    shot = tmp_path / f"{backend}-tasks-zh.png"
    d.save_screenshot(str(shot))  # type: ignore[attr-defined]
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, SHOTS / shot.name)
    # it sticks: follow the navigation, no ?lang in the URL
    expected = {"/queues": "队列", "/dead": "死信", "/cron": "定时任务"}
    for path, heading in expected.items():
        _css(d, f"header a[href='{path}']").click()  # type: ignore[attr-defined]
        _until(d, lambda drv, p=path: drv.current_url.endswith(p))  # type: ignore[misc]
        assert "lang=" not in d.current_url  # type: ignore[attr-defined]
        assert _html_lang(d) == "zh", path
        assert _css(d, "h1").text == heading  # type: ignore[attr-defined]
        d.save_screenshot(str(tmp_path / f"{backend}{path.replace('/', '-')}-zh.png"))  # type: ignore[attr-defined]
    # the task page: its labels, and its explanation in the same language
    d.get(url + f"/tasks/{s.later}")  # type: ignore[attr-defined]
    why = _css(d, "#why").text  # type: ignore[attr-defined]
    assert "为什么现在没有运行" in why and "尚未到期" in why
    assert "取消任务" in _css(d, "#cancel-btn").text  # type: ignore[attr-defined]
    headings = [h.text for h in d.find_elements("css selector", "h2")]  # type: ignore[attr-defined]
    assert "经过" in headings
    d.save_screenshot(str(tmp_path / f"{backend}-task-zh.png"))  # type: ignore[attr-defined]
    shutil.copy(tmp_path / f"{backend}-task-zh.png", SHOTS / f"{backend}-task-zh.png")
    # an action keeps the language (the form posts from this page: same origin)
    _css(d, "#cancel-form input[name=by]").send_keys("值班")  # type: ignore[attr-defined]
    _css(d, "#cancel-form input[name=note]").send_keys("不再需要")  # type: ignore[attr-defined]
    _css(d, "#cancel-btn").click()  # type: ignore[attr-defined]
    outcome = _css(d, "#outcome").text  # type: ignore[attr-defined]
    assert "结果" in outcome and "cancelled" in outcome
    assert _html_lang(d) == "zh"
    # and back to English, which sticks as well
    _css(d, "#lang-switch").click()  # type: ignore[attr-defined]
    _until(d, lambda drv: _html_lang(drv) == "en")
    d.get(url + "/dead")  # type: ignore[attr-defined]
    assert _html_lang(d) == "en" and _css(d, "h1").text == "Dead letters"  # type: ignore[attr-defined]


def test_language_over_http(site: tuple[str, Seeded, str]) -> None:
    url, s, _ = site
    # no choice yet: English, or what Accept-Language prefers
    status, page, _ = fetch(url + "/")
    assert status == 200 and '<html lang="en">' in page and "<h1>Tasks</h1>" in page
    _, page, _ = fetch(url + "/queues", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"})
    assert '<html lang="zh">' in page and "<h1>队列</h1>" in page
    _, page, _ = fetch(url + "/queues", headers={"Accept-Language": "fr,en;q=0.5,zh;q=0.2"})
    assert '<html lang="en">' in page
    # ?lang= sets the cookie (HttpOnly, SameSite=Lax, a year), and the cookie beats the header
    status, page, headers = fetch(url + "/dead?lang=zh")
    assert status == 200 and "<h1>死信</h1>" in page
    cookie = headers["set-cookie"]
    assert cookie.startswith("lang=zh;") and "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert f"Max-Age={i18n.COOKIE_MAX_AGE}" in cookie
    _, page, headers = fetch(url + "/cron", headers={"Cookie": "lang=zh", "Accept-Language": "en"})
    assert "<h1>定时任务</h1>" in page and "set-cookie" not in {k.lower() for k in headers}
    # the switch link keeps the other filters and offers the other language
    _, page, _ = fetch(url + "/?state=dead", headers={"Cookie": "lang=zh"})
    assert 'href="/?state=dead&amp;lang=en" id="lang-switch"' in page
    # a language we do not have is refused on every page; a bad cookie is ignored
    for path in ("/", "/queues", "/dead", f"/tasks/{s.dead}"):
        assert fetch(url + path + "?lang=fr")[0] == 422, path
    assert '<html lang="en">' in fetch(url + "/", headers={"Cookie": "lang=fr"})[1]
    # the error page speaks the caller's language too
    status, page, _ = fetch(url + "/tasks/999999", headers={"Cookie": "lang=zh"})
    assert status == 404 and "错误 404" in page and "返回任务列表" in page
    # the task page: explanation and labels in Chinese, codes unchanged
    _, page, _ = fetch(url + f"/tasks/{s.dead}", headers={"Cookie": "lang=zh"})
    assert "permanent_error" in page and "经过" in page and "载荷" in page
    assert "Timeline" not in page and "Payload" not in page
