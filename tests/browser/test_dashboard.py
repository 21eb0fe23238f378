"""The dashboard in a real headless Chromium (selenium + Debian's chromium-driver) against a
real uvicorn server and a real store (SQLite and PostgreSQL) seeded with tasks in many states.

The ``browser`` fixture (tests/browser/chromium.py) is skipped with a reason when
/usr/bin/chromium is missing, except under ``CI=true`` where that is a failure. Screenshots of
every page land in ``test-artifacts/screenshots/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chromium import browser_fixture  # noqa: F401  (provides the `browser` fixture)
from dashboard_seed import Seeded, Served, seed

SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


@pytest.fixture
def site(store: object) -> Iterator[tuple[str, Seeded, str]]:
    seeded = seed(store.app())  # type: ignore[attr-defined]
    served = Served(seeded.app)
    try:
        yield served.url, seeded, store.backend  # type: ignore[attr-defined]
    finally:
        served.stop()


def _shot(driver: object, backend: str, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{backend}-{name}.png"))  # type: ignore[attr-defined]


def _css(driver: object, selector: str) -> object:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)  # type: ignore[attr-defined]


def _all(driver: object, selector: str) -> list[object]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))  # type: ignore[attr-defined]


def _wait_ids(driver: object, selector: str, expected: list[str], timeout: float = 10) -> None:
    """Wait until the rows at ``selector`` carry exactly ``expected`` ids (in any order): after
    a click the old page may still be there, so a single read can see it, or nothing."""
    from selenium.webdriver.support.ui import WebDriverWait

    def ids(d: object) -> bool:
        try:
            seen = sorted(r.get_attribute("data-id") for r in _all(d, selector))  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a row went stale while the page changed: look again
            return False
        return seen == sorted(expected)

    try:
        WebDriverWait(driver, timeout).until(ids)
    except Exception:
        seen = [r.get_attribute("data-id") for r in _all(driver, selector)]  # type: ignore[attr-defined]
        raise AssertionError(f"rows {seen}, expected {sorted(expected)}") from None


def _wait_css(driver: object, selector: str, timeout: float = 10) -> object:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, selector))
    )


def _wait_text(driver: object, selector: str, *needles: str, timeout: float = 10) -> str:
    """Wait until the element at ``selector`` shows every one of ``needles``; its text. After a
    click htmx swaps the old element out: a read may see the old one, or one gone stale."""
    from selenium.webdriver.support.ui import WebDriverWait

    def shown(d: object) -> str | bool:
        try:
            text: str = _css(d, selector).text  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - not there yet, or swapped out while read
            return False
        return text if all(n in text for n in needles) else False

    return str(WebDriverWait(driver, timeout).until(shown))


def _fill_and_submit(driver: object, form: str, button: str, by: str, note: str) -> None:
    _css(driver, f"{form} input[name=by]").send_keys(by)  # type: ignore[attr-defined]
    _css(driver, f"{form} input[name=note]").send_keys(note)  # type: ignore[attr-defined]
    _css(driver, button).click()  # type: ignore[attr-defined]


def test_every_page_loads(browser: object, site: tuple[str, Seeded, str]) -> None:
    url, s, backend = site
    d = browser
    d.get(url + "/")  # type: ignore[attr-defined]
    counts = {
        e.get_attribute("data-state"): int(e.find_element("css selector", "b").text)  # type: ignore[attr-defined]
        for e in _all(d, "#counts .count")
    }
    assert counts["dead"] == 2 and counts["leased"] == 1
    assert counts["queued"] == len(s.app.list(state="queued"))
    assert len(_all(d, "#task-list .task-row")) == len(s.app.list(limit=100))
    _shot(d, backend, "tasks")
    pages = {
        "task-succeeded": f"/tasks/{s.succeeded}",
        "task-workflow": f"/tasks/{s.parent}",
        "queues": "/queues",
        "dead": "/dead",
        "cron": "/cron",
    }
    for name, path in pages.items():
        d.get(url + path)  # type: ignore[attr-defined]
        assert "Error" not in d.title, (path, d.title)  # type: ignore[attr-defined]
        _shot(d, backend, name)
    d.get(url + f"/tasks/{s.succeeded}")  # type: ignore[attr-defined]
    steps = _css(d, "#steps").text  # type: ignore[attr-defined]
    assert "upload_images" in steps and f"{s.succeeded}/submit_body" in steps
    assert "note.published" in _css(d, "#outbox").text  # type: ignore[attr-defined]
    d.get(url + f"/tasks/{s.parent}")  # type: ignore[attr-defined]
    assert len(_all(d, "#children tr")) == 3  # header + two children
    d.get(url + "/cron")  # type: ignore[attr-defined]
    assert _css(d, ".schedule[data-kind=tick]")
    skipped = _css(d, ".skipped").text  # type: ignore[attr-defined]
    assert "window_skipped_catch_up_bound" in skipped
    assert _all(d, ".windows a")  # the window that ran links to its task
    _shot(d, backend, "cron")


def test_filter_list_and_open_a_task(browser: object, site: tuple[str, Seeded, str]) -> None:
    from selenium.webdriver.support.ui import Select

    url, s, backend = site
    d = browser
    d.get(url + "/")  # type: ignore[attr-defined]
    Select(_css(d, "#f-state")).select_by_value("dead")
    _css(d, "#f-go").click()  # type: ignore[attr-defined]
    _wait_ids(d, "#task-list .task-row", [s.dead, s.dead_other])
    assert "state=dead" in d.current_url  # type: ignore[attr-defined]
    _shot(d, backend, "tasks-filtered")
    # search by idempotency key
    d.get(url + "/")  # type: ignore[attr-defined]
    _css(d, "#f-q").send_keys("note-42")  # type: ignore[attr-defined]
    _css(d, "#f-go").click()  # type: ignore[attr-defined]
    _wait_ids(d, ".task-row", [s.keyed])
    # open it from the list: the timeline shows each transition's sentence and code
    _css(d, f".task-row[data-id='{s.keyed}'] a").click()  # type: ignore[attr-defined]
    _wait_css(d, "#timeline")
    reasons = [r.get_attribute("data-reason") for r in _all(d, "#timeline .transition")]  # type: ignore[attr-defined]
    assert reasons[0] == "enqueued" and reasons[-1] == "completed"
    assert not _all(d, "#cancel-form") and not _all(d, "#replay-form")  # succeeded: no actions
    # the language switch
    _css(d, "#lang-switch").click()  # type: ignore[attr-defined]
    _wait_css(d, "#timeline")
    assert "lang=zh" in d.current_url  # type: ignore[attr-defined]
    assert "经过" in [h.text for h in _all(d, "h2")]  # type: ignore[attr-defined]
    _shot(d, backend, "task-zh")
    # a task that is not due says why it is not running (the switch stuck: back to English)
    d.get(url + f"/tasks/{s.later}?lang=en")  # type: ignore[attr-defined]
    assert "not due" in _css(d, "#why").text  # type: ignore[attr-defined]


def test_cancel_a_leased_task(browser: object, site: tuple[str, Seeded, str]) -> None:
    url, s, backend = site
    d = browser
    d.get(url + f"/tasks/{s.leased}")  # type: ignore[attr-defined]
    assert "web-1:412:7f3a" in _css(d, "#why").text  # type: ignore[attr-defined]
    assert not _all(d, "#replay-form")  # not dead: no Replay offered
    _fill_and_submit(d, "#cancel-form", "#cancel-btn", "bob", "customer asked to stop")
    outcome = _wait_css(d, "#outcome")
    assert "cancel_requested" in outcome.text  # type: ignore[attr-defined]
    assert _css(d, "#task-state").text == "cancel_requested"  # type: ignore[attr-defined]
    assert not _all(d, "#cancel-form")  # already requested: nothing more to do
    last = _all(d, "#timeline .transition")[-1]
    assert last.get_attribute("data-reason") == "cancel_requested"  # type: ignore[attr-defined]
    assert "bob" in last.text and "customer asked to stop" in last.text  # type: ignore[attr-defined]
    assert s.app.get(s.leased).state.value == "cancel_requested"
    _shot(d, backend, "task-cancel-requested")


def test_replay_a_dead_task(browser: object, site: tuple[str, Seeded, str]) -> None:
    url, s, backend = site
    d = browser
    d.get(url + f"/tasks/{s.dead}")  # type: ignore[attr-defined]
    assert not _all(d, "#cancel-form")  # terminal: no Cancel offered
    assert "token revoked" in _css(d, "#timeline").text  # type: ignore[attr-defined]
    _shot(d, backend, "task-dead")
    _fill_and_submit(d, "#replay-form", "#replay-btn", "carol", "token renewed")
    assert "replayed" in _wait_css(d, "#outcome").text  # type: ignore[attr-defined]
    last = _all(d, "#timeline .transition")[-1]
    assert last.get_attribute("data-reason") == "replayed"  # type: ignore[attr-defined]
    assert "carol" in last.text  # type: ignore[attr-defined]
    assert _css(d, "#task-state").text == "queued"  # type: ignore[attr-defined]
    _shot(d, backend, "task-replayed")


def test_pause_and_resume_a_queue(browser: object, site: tuple[str, Seeded, str]) -> None:
    url, s, backend = site
    d = browser
    d.get(url + "/queues")  # type: ignore[attr-defined]
    row = "#queues .queue-row[data-queue=default]"
    assert "running" in _css(d, f"{row} .qstatus").text  # type: ignore[attr-defined]
    assert _all(d, "figure.chart svg.chart")  # the last hour's activity chart, per queue
    _fill_and_submit(d, f"{row} form", f"{row} .pause-btn", "dave", "provider outage")
    _wait_css(d, "#outcome")
    _wait_text(d, f"{row} .qstatus", "paused", "dave", "provider outage")
    assert next(q for q in s.app.queues() if q["queue"] == "default")["paused"]
    _shot(d, backend, "queues-paused")
    _fill_and_submit(d, f"{row} form", f"{row} .resume-btn", "dave", "provider back")
    _wait_text(d, f"{row} .qstatus", "running")
    assert not next(q for q in s.app.queues() if q["queue"] == "default")["paused"]


def test_batch_replay_with_preview(browser: object, site: tuple[str, Seeded, str]) -> None:
    from selenium.webdriver.support.ui import Select

    url, s, backend = site
    d = browser
    d.get(url + "/dead")  # type: ignore[attr-defined]
    reasons = {g.get_attribute("data-reason") for g in _all(d, ".dead-group")}  # type: ignore[attr-defined]
    assert reasons == {"permanent_error"}
    Select(_css(d, "#p-reason")).select_by_value("permanent_error")
    _css(d, "#preview-btn").click()  # type: ignore[attr-defined]
    ids = _wait_css(d, "#preview-ids")  # swapped in by htmx
    shown = sorted(a.text for a in ids.find_elements("css selector", "a"))  # type: ignore[attr-defined]
    assert shown == sorted([s.dead, s.dead_other])
    assert "/dead" in d.current_url and "preview" not in d.current_url  # type: ignore[attr-defined]
    _shot(d, backend, "dead-preview")
    _fill_and_submit(d, "#replay-dead-form", "#confirm-replay", "erin", "bug fixed in 1.1")
    rows = _wait_css(d, "#replayed")
    assert s.dead in rows.text and s.dead_other in rows.text  # type: ignore[attr-defined]
    assert {s.app.get(i).state.value for i in (s.dead, s.dead_other)} == {"queued"}
    _shot(d, backend, "dead-replayed")
