"""The dashboard for people on call, in a real headless Chromium against one real uvicorn
server over one SQLite store for the whole module: bulk actions (three ticked tasks; "all
matching" with its preview), search by a payload field with a shareable address, a page that
follows a state change without a reload (and holds still while a form is filled), the workers
page listing a worker subprocess, the picture of a task that retried, the layout at 1280 and
1920 px in English and Chinese, and an axe-core check of every page (no serious or critical
violation). Controls are found as a screen reader finds them: by role and accessible name.

Screenshots land in ``test-artifacts/screenshots/oncall-*.png``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import browser_fixture  # noqa: F401  (provides the `browser` fixture)
from dashboard_seed import Seeded, Served, seed

import jobtrail

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
AXE = Path(__file__).with_name("vendor") / "axe-core" / "axe.min.js"


class Site:
    def __init__(self, url: str, seeded: Seeded, db: Path) -> None:
        self.url = url
        self.seeded = seeded
        self.app = seeded.app
        self.db = db


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("oncall")
    db = folder / "oncall.db"
    app = jobtrail.App(f"sqlite:///{db}")
    app.migrate()
    seeded = seed(app)
    served = Served(app)
    try:
        yield Site(served.url, seeded, db)
    finally:
        served.stop()
        app.close()


def _by_name(driver: Any, role: str, name: str) -> Any:
    """The one element of ``role`` whose accessible name is ``name`` (as Chromium computes
    both: what a screen reader announces)."""
    from selenium.webdriver.common.by import By

    tags = {
        "checkbox": "input[type=checkbox]",
        "button": "button",
        "textbox": "input:not([type]), input[type=text]",
        "searchbox": "input[type=search]",
        "link": "a",
    }[role]
    found = [
        e
        for e in driver.find_elements(By.CSS_SELECTOR, tags)
        if e.accessible_name == name and e.aria_role == role
    ]
    assert len(found) == 1, f"{len(found)} {role}s named {name!r}"
    return found[0]


def _wait(predicate: Any, timeout: float = 10, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - the page changed under the read: look again
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _text(driver: Any, selector: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, selector).text)


def _rows(driver: Any, selector: str) -> list[tuple[str, str]]:
    """``(data-id, text)`` of each row at ``selector``, read in one script (one instant)."""
    found = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(r => [r.getAttribute('data-id'), r.innerText])",
        selector,
    )
    return [(str(i), str(t)) for i, t in found]


def _fill_operator(driver: Any, by: str = "oncall-ann", note: str = "incident 42") -> None:
    _by_name(driver, "textbox", "operator").send_keys(by)
    _by_name(driver, "textbox", "note").send_keys(note)


def test_bulk_cancel_of_three_selected_tasks(site: Site, browser: Any) -> None:
    tasks = [site.app.enqueue("publish_note", {"bulk": i}, delay=3600) for i in range(4)]
    chosen, spared = tasks[:3], tasks[3]
    browser.get(site.url + "/?state=queued")
    for t in chosen:
        _by_name(browser, "checkbox", f"select task {t.id}").click()
    _fill_operator(browser)
    _by_name(browser, "button", "Cancel").click()
    _wait(lambda: "3 of 3 tasks done" in _text(browser, "#bulk-live"), what="the progress page")
    assert "finished" in _text(browser, "#bulk-state")
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / "oncall-bulk-progress.png"))
    for t in chosen:
        task = site.app.get(t.id)
        assert task.state is jobtrail.State.CANCELLED
        last = site.app.transitions(t.id)[-1]
        assert (last.actor, last.note) == ("oncall-ann", "incident 42")
    assert site.app.get(spared.id).state is jobtrail.State.QUEUED
    cells = [r.text for r in browser.find_elements("css selector", "tr.bulk-outcome")]
    assert cells == ["cancelled 3"]


def test_select_all_matching_with_its_preview(site: Site, browser: Any) -> None:
    @site.app.task("sweepable", max_attempts=1)
    def sweepable(ctx: jobtrail.Context, payload: object) -> None:  # pragma: no cover
        pass

    queued = [site.app.enqueue("sweepable", {"n": i}, delay=3600) for i in range(3)]
    done = [site.app.enqueue("sweepable", {"n": 10 + i}, delay=3600) for i in range(2)]
    for t in done:
        site.app.cancel(t.id, by="setup", note="already gone")
    browser.get(site.url + "/?kind=sweepable")
    box = _by_name(browser, "checkbox", "select all 5 matching the filter")
    preview = _text(browser, "#selection-preview")
    assert "3 queued" in preview and "2 cancelled" in preview, preview
    box.click()
    _fill_operator(browser, note="drain the sweepable backlog")
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / "oncall-select-all.png"))
    _by_name(browser, "button", "Cancel").click()
    _wait(lambda: "5 of 5 tasks done" in _text(browser, "#bulk-live"), what="the progress page")
    outcomes = sorted(r.text for r in browser.find_elements("css selector", "tr.bulk-outcome"))
    assert outcomes == ["already_terminal 2", "cancelled 3"]
    assert all(site.app.get(t.id).state is jobtrail.State.CANCELLED for t in queued)


def test_search_by_a_payload_field_has_a_shareable_address(site: Site, browser: Any) -> None:
    wanted = site.app.enqueue("publish_note", {"order_id": 17, "body": "x"}, delay=3600)
    site.app.enqueue("publish_note", {"order_id": 18, "body": "x"}, delay=3600)
    site.app.enqueue("publish_note", {"order_id": "17", "body": "text, not a number"}, delay=3600)
    browser.get(site.url + "/")
    box = _by_name(browser, "searchbox", "Search")
    box.send_keys("payload.order_id = 17\n")
    _wait(lambda: "q=payload.order_id" in browser.current_url, what="the search's address")
    ids = [r.get_attribute("data-id") for r in browser.find_elements("css selector", "tr.task-row")]
    assert ids == [wanted.id]
    shared = browser.current_url
    browser.get(site.url + "/workers")
    browser.get(shared)  # the address alone gives the same answer
    ids = [r.get_attribute("data-id") for r in browser.find_elements("css selector", "tr.task-row")]
    assert ids == [wanted.id]
    assert _by_name(browser, "searchbox", "Search").get_attribute("value") == (
        "payload.order_id = 17"
    )


def test_a_page_follows_a_state_change_without_a_reload(site: Site, browser: Any) -> None:
    task = site.app.enqueue("publish_note", {"live": 1}, delay=3600)
    browser.get(f"{site.url}/tasks/{task.id}")
    browser.execute_script("window.__same_page = 'yes'")
    assert _text(browser, "#task-state") == "queued"
    site.app.cancel(task.id, by="elsewhere", note="from the CLI")
    changed = time.monotonic()
    _wait(lambda: _text(browser, "#task-state") == "cancelled", 5, "the live update")
    assert time.monotonic() - changed < 2.5
    assert browser.execute_script("return window.__same_page") == "yes"  # not reloaded
    # while a form is being filled the page holds still, and follows again after it
    other = site.app.enqueue("publish_note", {"live": 2}, delay=3600)
    browser.get(f"{site.url}/tasks/{other.id}")
    browser.execute_script("window.__same_page = 'yes'")
    field = _by_name(browser, "textbox", "operator")
    field.send_keys("half-typed")
    site.app.cancel(other.id, by="elsewhere", note="from the CLI")
    time.sleep(3)  # longer than the live period: a change would have arrived by now
    assert _text(browser, "#task-state") == "queued"
    assert field.get_attribute("value") == "half-typed"
    assert _text(browser, "#live-status") == "live updates paused while you fill a form"
    browser.get(f"{site.url}/tasks/{other.id}")
    assert _text(browser, "#task-state") == "cancelled"


WORKER_APP = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("oncall_job", queue="oncall-q")
    def oncall_job(ctx, payload):
        return payload
""")


def test_the_workers_page_lists_a_running_worker(site: Site, browser: Any, tmp_path: Path) -> None:
    (tmp_path / "oncallapp.py").write_text(WORKER_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["JOBTRAIL_DATABASE_URL"] = f"sqlite:///{site.db}"
    argv = [sys.executable, "-m", "jobtrail", "worker", "--app", "oncallapp:app"]
    argv += ["--queue", "oncall-q", "--concurrency", "3"]
    log = tmp_path / "worker.log"
    with log.open("w") as err:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait(
            lambda: any(w.pid == proc.pid for w in site.app.workers()) or proc.poll() is not None,
            30,
            "the heartbeat",
        )
        assert proc.poll() is None, log.read_text()
        browser.get(site.url + "/")
        _by_name(browser, "link", "Workers").click()
        _wait(lambda: browser.current_url.endswith("/workers"), what="the workers page")
        rows = _rows(browser, "tr.worker")  # read at once: a live update may replace them
        [(worker_id, text)] = [(i, t) for i, t in rows if f":{proc.pid}:" in i]
        assert "oncall-q" in text and "oncall_job" in text and "\t3\t" in text, text
        # the queue's page names the workers that serve it
        browser.get(site.url + "/queues/oncall-q")
        assert [i for i, _ in _rows(browser, "tr.worker")] == [worker_id]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_picture_of_a_task_that_retried(site: Site, browser: Any) -> None:
    failures: list[int] = []

    @site.app.task("wobbly", max_attempts=3, backoff_base=0.2, backoff_cap=0.3)
    def wobbly(ctx: jobtrail.Context, payload: object) -> str:
        if len(failures) < 1:
            failures.append(1)
            raise jobtrail.TransientError("upstream 503")
        return "ok"

    task = site.app.enqueue("wobbly", {"n": 1}, queue="wobblyq")
    site.app.run_worker(queues=["wobblyq"], burst=True, drain=5)
    assert site.app.get(task.id).state is jobtrail.State.SUCCEEDED
    browser.get(f"{site.url}/tasks/{task.id}")
    svg = browser.find_element("css selector", "#life svg.life")
    assert svg.size["width"] > 600 and svg.size["height"] > 40
    bars = browser.find_elements("css selector", "#life svg g.phase")
    assert [b.get_attribute("class") for b in bars] == [
        "phase p-queue",
        "phase p-run",
        "phase p-retry",
        "phase p-run",
    ]
    items = [li.text for li in browser.find_elements("css selector", "#life-phases li")]
    assert items[0].startswith("queued: ") and "(enqueued → claimed)" in items[0]
    assert items[1].startswith("attempt 1: ") and "(claimed → retry_scheduled)" in items[1]
    assert items[2].startswith("waiting to retry: ") and "(retry_scheduled → claimed)" in items[2]
    assert items[3].startswith("attempt 2: ") and "(claimed → completed)" in items[3]
    assert items[4].startswith("ended succeeded (completed) at +")
    assert len(items) == 5
    # the reasons are written on the picture where they fit, and in every bar's tooltip
    titles = [t.get_attribute("textContent") for t in svg.find_elements("css selector", "title")]
    assert titles == items
    assert "time since it was enqueued" in svg.get_attribute("textContent")
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / "oncall-life-retried.png"))


PAGES = [
    "/",
    "/?q=payload.order_id%20%3D%2017",
    "/queues",
    "/queues/default",
    "/dead",
    "/workers",
    "/cron",
]


def _pages(site: Site) -> list[str]:
    s = site.seeded
    return [*PAGES, f"/tasks/{s.dead}", f"/tasks/{s.succeeded}", f"/tasks/{s.parent}"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_layout_at_1280_and_1920_pixels(site: Site, browser: Any, lang: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    overflowing = []
    try:
        for width in (1280, 1920):
            browser.set_window_size(width, 1100)
            for page in _pages(site):
                sep = "&" if "?" in page else "?"
                browser.get(f"{site.url}{page}{sep}lang={lang}")
                inner, scroll = browser.execute_script(
                    "return [window.innerWidth, document.documentElement.scrollWidth]"
                )
                if scroll > inner:
                    overflowing.append((width, page, scroll, inner))
                name = page.strip("/").split("?")[0].replace("/", "-") or "tasks"
                name += "-search" if "q=" in page else ""
                browser.save_screenshot(str(SHOTS / f"oncall-{lang}-{width}-{name}.png"))
    finally:
        browser.set_window_size(1280, 1000)
    assert overflowing == []


def _axe(driver: Any) -> list[dict[str, Any]]:
    driver.execute_script(AXE.read_text(encoding="utf-8"))
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))"
        ".catch(e => done([{id: 'axe-error', impact: 'critical', nodes: [String(e)]}]));"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_passes_axe(site: Site, browser: Any, lang: str) -> None:
    browser.set_script_timeout(60)
    found: dict[str, Any] = {}
    for page in [*_pages(site), "/dead?preview=1"]:
        sep = "&" if "?" in page else "?"
        browser.get(f"{site.url}{page}{sep}lang={lang}")
        bad = _axe(browser)
        if bad:
            found[page] = bad
    # the pages a bulk action shows: the replay's confirmation and the progress page
    browser.get(f"{site.url}/?state=dead&lang={lang}")
    _by_name_any(browser, "input.pick").click()
    browser.find_element("css selector", "#bulk-by").send_keys("axe")
    browser.find_element("css selector", "#bulk-note").send_keys("check")
    browser.find_element("css selector", "#bulk-replay").click()
    _wait(lambda: browser.find_elements("css selector", "#bulk-confirm"), what="the confirmation")
    if bad := _axe(browser):
        found["bulk confirm"] = bad
    browser.find_element("css selector", "#bulk-confirm").click()
    _wait(lambda: browser.find_elements("css selector", "#bulk-progress"), what="the progress")
    if bad := _axe(browser):
        found["bulk progress"] = bad
    assert found == {}


def test_the_axe_check_finds_a_violation(site: Site, browser: Any) -> None:
    browser.get(site.url + "/workers")
    browser.execute_script(
        "const i = document.createElement('input'); document.querySelector('main').append(i);"
    )
    assert "label" in [v["id"] for v in _axe(browser)]


def _by_name_any(driver: Any, selector: str) -> Any:
    return driver.find_elements("css selector", selector)[0]
