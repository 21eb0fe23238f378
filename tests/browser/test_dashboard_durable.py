"""The dashboard's pages of durable handlers and enqueue controls, in a real headless Chromium
against one real uvicorn server over one SQLite store for the module: the picture of a life
that retried, slept and waited for an event; the task page of a sleeping task, a task waiting
for an event and one waiting for its children, and of a debounced task (what ``explain`` says,
in English and Chinese); a waiting task cancelled from its page and by a bulk cancel; the
``waiting`` state in the task list's counts and filter; the suspended counts on the queue
page; an axe-core check and the layout at 1280 px of a suspended task's page.

Screenshots land in ``test-artifacts/screenshots/durable-*.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chromium import browser_fixture  # noqa: F401  (provides the `browser` fixture)
from dashboard_seed import Served
from test_dashboard_oncall import SHOTS, _axe, _by_name, _fill_operator, _text, _wait

import jobtrail

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


class Site:
    def __init__(self, url: str, app: jobtrail.App, tasks: dict[str, str]) -> None:
        self.url = url
        self.app = app
        self.tasks = tasks


def _suspend(app: jobtrail.App) -> dict[str, str]:
    """Tasks left suspended: sleeping, waiting for an event, joining three children of which
    one has finished; and a task debounced twice that expires."""
    failed: list[int] = []

    @app.task("durable_life", max_attempts=3, backoff_base=0.2, backoff_cap=0.3)
    def durable_life(ctx: jobtrail.Context, payload: dict[str, Any]) -> Any:
        if not failed:
            failed.append(1)
            raise jobtrail.TransientError("upstream 503")
        ctx.sleep("cool_off", payload["sleep"])
        return ctx.wait_for_event(payload["event"], timeout=payload.get("timeout"))

    @app.task("child_job")
    def child_job(ctx: jobtrail.Context, payload: object) -> object:
        return payload

    @app.task("fan_out")
    def fan_out(ctx: jobtrail.Context, payload: object) -> object:
        first = ctx.spawn("first", "child_job", {"n": 1}, queue="fastq")
        rest = [ctx.spawn(f"c{n}", "child_job", {"n": n}, queue="holdq") for n in (2, 3)]
        return ctx.join([first, *rest])

    @app.task("noisy")
    def noisy(ctx: jobtrail.Context, payload: object) -> None:  # pragma: no cover
        pass

    life = app.enqueue("durable_life", {"sleep": 0.3, "event": "approved-1"}, queue="lifeq")
    app.run_worker(queues=["lifeq"], burst=True, drain=5)  # fails, retries, sleeps, waits
    assert app.get(life.id).state is jobtrail.State.WAITING
    assert app.send_event("approved-1", {"by": "ann"}) == 1
    app.run_worker(queues=["lifeq"], burst=True, drain=5)
    assert app.get(life.id).state is jobtrail.State.SUCCEEDED
    sleeper = app.enqueue("durable_life", {"sleep": 3600, "event": "never"}, queue="suspq")
    waiter = app.enqueue("durable_life", {"sleep": 0.01, "event": "invoice-9"}, queue="suspq")
    bulk_w = app.enqueue("durable_life", {"sleep": 0.01, "event": "bulk-1"}, queue="suspq")
    joiner = app.enqueue("fan_out", None, queue="suspq")
    app.run_worker(queues=["suspq", "fastq"], burst=True, drain=5)
    assert [app.get(t.id).state.value for t in (sleeper, waiter, bulk_w, joiner)] == [
        "queued",
        "waiting",
        "waiting",
        "waiting",
    ]
    for i in range(3):
        debounced = app.enqueue(
            "noisy", {"i": i}, debounce_key="k1", debounce=3600, expires_in=7200
        )
    return {
        "life": life.id,
        "sleeper": sleeper.id,
        "waiter": waiter.id,
        "bulk_waiter": bulk_w.id,
        "joiner": joiner.id,
        "debounced": debounced.id,
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    db = tmp_path_factory.mktemp("durable") / "durable.db"
    app = jobtrail.App(f"sqlite:///{db}")
    app.migrate()
    tasks = _suspend(app)
    served = Served(app)
    try:
        yield Site(served.url, app, tasks)
    finally:
        served.stop()
        app.close()


def _shot(browser: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / f"durable-{name}.png"))


def test_the_picture_of_a_life_that_retried_slept_and_waited(site: Site, browser: Any) -> None:
    browser.get(f"{site.url}/tasks/{site.tasks['life']}?lang=en")
    svg = browser.find_element("css selector", "#life svg.life")
    assert svg.size["width"] > 600 and svg.size["height"] > 40
    bars = [b.get_attribute("class") for b in svg.find_elements("css selector", "g.phase")]
    assert bars == [
        f"phase p-{k}"
        for k in ("queue", "run", "retry", "run", "sleep", "run", "wait_event", "queue", "run")
    ]
    items = [li.text for li in browser.find_elements("css selector", "#life-phases li")]
    assert items[1].startswith("attempt 1: ") and "(claimed → retry_scheduled)" in items[1]
    assert items[2].startswith("waiting to retry: ") and "(retry_scheduled → claimed)" in items[2]
    assert items[3].startswith("attempt 2: ") and "(claimed → sleeping)" in items[3]
    assert items[4].startswith("sleeping: ") and "(sleeping → claimed)" in items[4]
    assert items[6].startswith("waiting for an event: ") and (
        "(waiting_for_event → event_received)" in items[6]
    )
    assert items[7].startswith("queued: ") and "(event_received → claimed)" in items[7]
    assert items[8].startswith("attempt 2: ") and "(claimed → completed)" in items[8]
    assert items[9].startswith("ended succeeded (completed) at +") and len(items) == 10
    titles = [t.get_attribute("textContent") for t in svg.find_elements("css selector", "title")]
    assert titles == items
    lanes = [t.text for t in svg.find_elements("css selector", "text.lane")]
    assert lanes == ["queued", "attempts", "retry waits", "sleeps", "waits"]
    _shot(browser, "life")
    browser.get(f"{site.url}/tasks/{site.tasks['life']}?lang=zh")
    zh = [li.text for li in browser.find_elements("css selector", "#life-phases li")]
    assert [z.split("：")[0] for z in zh[:7]] == [
        "排队",
        "第 1 次尝试",
        "等待重试",
        "第 2 次尝试",
        "休眠",
        "第 2 次尝试",
        "等待事件",
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_suspended_task_page_says_what_it_waits_for(site: Site, browser: Any, lang: str) -> None:
    expect = {
        "en": {
            "sleeper": "sleeping until 20",
            "sleep_name": "(sleep 'cool_off')",
            "waiter": "waiting for event invoice-9 since 20",
            "joiner": "waiting for 2 of 3 children: #",
            "debounced": "debounced 2 times; runs at 20",
            "expires": "expires at 20",
        },
        "zh": {
            "sleeper": "休眠至 20",
            "sleep_name": "（休眠 'cool_off'）",
            "waiter": "起等待事件 invoice-9",
            "joiner": "等待 3 个子任务中的 2 个：#",
            "debounced": "已防抖合并了 2 次；于 20",
            "expires": "过期",
        },
    }[lang]
    why = {}
    for name in ("sleeper", "waiter", "joiner", "debounced"):
        browser.get(f"{site.url}/tasks/{site.tasks[name]}?lang={lang}")
        why[name] = _text(browser, "#why")
        if name == "joiner":
            _shot(browser, f"{lang}-joiner")
    assert expect["sleeper"] in why["sleeper"] and expect["sleep_name"] in why["sleeper"]
    assert expect["waiter"] in why["waiter"]
    assert expect["joiner"] in why["joiner"]
    assert expect["debounced"] in why["debounced"] and expect["expires"] in why["debounced"]


def test_a_waiting_task_is_cancelled_from_its_page(site: Site, browser: Any) -> None:
    task_id = site.tasks["waiter"]
    browser.get(f"{site.url}/tasks/{task_id}?lang=en")
    assert _text(browser, "#task-state") == "waiting"
    _by_name(browser, "textbox", "operator").send_keys("oncall-ann")
    _by_name(browser, "textbox", "note").send_keys("the invoice was voided")
    browser.find_element("css selector", "#cancel-btn").click()
    _wait(lambda: _text(browser, "#task-state") == "cancelled", what="the cancelled page")
    assert "cancelled" in _text(browser, "#outcome")
    task = site.app.get(task_id)
    assert (task.state, task.last_reason) == (
        jobtrail.State.CANCELLED,
        "cancelled_while_suspended",
    )
    last = site.app.transitions(task_id)[-1]
    assert (last.actor, last.note) == ("oncall-ann", "the invoice was voided")


def test_the_task_list_counts_and_filters_waiting_tasks(site: Site, browser: Any) -> None:
    browser.get(f"{site.url}/?lang=en")
    count = browser.find_element("css selector", "#counts a.count[data-state=waiting]")
    waiting = {t.id for t in site.app.list(state="waiting")}
    assert count.text.split() == ["waiting", str(len(waiting))] and len(waiting) >= 2
    count.click()
    _wait(lambda: "state=waiting" in browser.current_url, what="the filtered list")
    rows = browser.find_elements("css selector", "tr.task-row")
    assert {r.get_attribute("data-id") for r in rows} == waiting
    selected = browser.find_element("css selector", "#f-state option:checked")
    assert selected.get_attribute("value") == "waiting"


def test_a_bulk_cancel_of_a_sleeping_and_a_waiting_task(site: Site, browser: Any) -> None:
    chosen = [site.tasks["sleeper"], site.tasks["bulk_waiter"]]
    browser.get(f"{site.url}/?queue=suspq&lang=en")
    for task_id in chosen:
        _by_name(browser, "checkbox", f"select task {task_id}").click()
    _fill_operator(browser, note="drain the suspended")
    _by_name(browser, "button", "Cancel").click()
    _wait(lambda: "2 of 2 tasks done" in _text(browser, "#bulk-live"), what="the progress page")
    for task_id in chosen:
        task = site.app.get(task_id)
        assert (task.state, task.last_reason) == (
            jobtrail.State.CANCELLED,
            "cancelled_while_suspended",
        )
    assert site.app.get(site.tasks["joiner"]).state is jobtrail.State.WAITING


def test_the_queue_page_counts_suspended_handlers(site: Site, browser: Any) -> None:
    browser.get(f"{site.url}/queues?lang=en")
    rows = [
        r.text
        for r in browser.find_elements("css selector", "#health tr")
        if r.text.startswith("suspq fan_out")
    ]
    assert (
        len(rows) == 1
        and "suspended: 0 sleeping, 0 waiting for events, 1 for children" in (rows[0])
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_suspended_task_page_passes_axe_and_fits_1280(
    site: Site, browser: Any, lang: str
) -> None:
    browser.set_script_timeout(60)
    browser.set_window_size(1280, 1000)
    found, overflowing = {}, []
    for name in ("joiner", "debounced", "life"):
        browser.get(f"{site.url}/tasks/{site.tasks[name]}?lang={lang}")
        inner, scroll = browser.execute_script(
            "return [window.innerWidth, document.documentElement.scrollWidth]"
        )
        if scroll > inner:
            overflowing.append((name, scroll, inner))
        _shot(browser, f"{lang}-1280-{name}")
        if bad := _axe(browser):
            found[name] = bad
    assert overflowing == [] and found == {}
