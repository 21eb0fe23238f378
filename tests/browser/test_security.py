"""The dashboard under attack in a real headless Chromium, against a real ``jobtrail serve``
with tokens: a person signs in (the token rides in the cookie), then visits pages of another
origin that try to act with that cookie. None of them may change anything.

A ``HostileSite`` serves the attacking pages, as the dashboard's same site on another port
(``127.0.0.1:other``: SameSite cookies still ride along) and as another site (``localhost``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from chromium import browser_fixture  # noqa: F401  (provides the `browser` fixture)
from hostile_site import HostileSite

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "acceptance"))

from serve_process import (  # noqa: E402
    HOSTILE_QUEUE,
    OTHER_TENANTS_QUEUE,
    Serve,
    seed_hostile,
    serving,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]
ADM = {"Authorization": "Bearer adm"}
COOKIE = "jobtrail_token"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    yield from serving(tmp_path_factory, "browser-security")


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileSite]:
    site = HostileSite()
    try:
        yield site
    finally:
        site.stop()


def _css(driver: object, selector: str) -> object:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)  # type: ignore[attr-defined]


def _landed(driver: object, prefix: str, timeout: float = 15, exact: bool = False) -> None:
    """Wait until the browser shows a loaded page whose URL starts with ``prefix`` (or is
    ``prefix``): callers pass a prefix the page they start from does not match."""
    from selenium.webdriver.support.ui import WebDriverWait

    def there(d: object) -> bool:
        url: str = d.current_url  # type: ignore[attr-defined]
        ready = d.execute_script("return document.readyState")  # type: ignore[attr-defined]
        return (url == prefix if exact else url.startswith(prefix)) and ready == "complete"

    try:
        WebDriverWait(driver, timeout).until(there)
    except Exception:
        url = driver.current_url  # type: ignore[attr-defined]
        raise AssertionError(f"the browser is at {url}, not under {prefix}") from None


def sign_in(driver: object, s: Serve, token: str = "adm") -> None:
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})  # type: ignore[attr-defined]
    driver.get(s.base + "/login")  # type: ignore[attr-defined]
    _css(driver, "input[name=token]").send_keys(token)  # type: ignore[attr-defined]
    _css(driver, "form button").click()  # type: ignore[attr-defined]
    _landed(driver, s.base + "/", exact=True)  # signed in: redirected to the task list
    assert cookie(driver, s) == token


def cookie(driver: object, s: Serve) -> str | None:
    if not driver.current_url.startswith(s.base):  # type: ignore[attr-defined]
        driver.get(s.base + "/")  # type: ignore[attr-defined]
        _landed(driver, s.base + "/")
    found = driver.get_cookie(COOKIE)  # type: ignore[attr-defined]
    return None if found is None else str(found["value"])


def queued_task(s: Serve) -> str:
    r = httpx.post(s.base + "/api/tasks", json={"kind": "send", "delay": 3600}, headers=ADM)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def state(s: Serve, task_id: str) -> str:
    return str(httpx.get(f"{s.base}/api/tasks/{task_id}", headers=ADM).json()["state"])


def page_text(driver: object) -> str:
    return str(_css(driver, "body").text)  # type: ignore[attr-defined]


def test_the_dashboards_own_cancel_button_still_works(browser: object, served: Serve) -> None:
    d = browser
    sign_in(d, served)
    task = queued_task(served)
    d.get(f"{served.base}/tasks/{task}")  # type: ignore[attr-defined]
    _css(d, "#cancel-form input[name=by]").send_keys("alice")  # type: ignore[attr-defined]
    _css(d, "#cancel-form input[name=note]").send_keys("customer asked")  # type: ignore[attr-defined]
    _css(d, "#cancel-btn").click()  # type: ignore[attr-defined]
    _landed(d, f"{served.base}/tasks/{task}?")
    assert "cancelled" in _css(d, "#outcome").text  # type: ignore[attr-defined]
    assert state(served, task) == "cancelled"


@pytest.mark.parametrize("where", ["cross_site", "same_site"])
def test_a_page_elsewhere_that_submits_a_cancel_form_changes_nothing(
    browser: object, served: Serve, hostile: HostileSite, where: str
) -> None:
    d = browser
    sign_in(d, served)
    task = queued_task(served)
    target = f"{served.base}/tasks/{task}/cancel"
    origin = getattr(hostile, where)
    d.get(f"{origin}/autosubmit?action={quote(target, safe='')}&by=mallory&note=csrf")  # type: ignore[attr-defined]
    _landed(d, target)  # the browser did post to the dashboard...
    assert "refused" in page_text(d)  # ...and was told no
    assert state(served, task) == "queued"
    assert cookie(d, served) == "adm"


def test_a_307_from_another_port_that_forwards_a_post_changes_nothing(
    browser: object, served: Serve, hostile: HostileSite
) -> None:
    """The attack that got through: a same-site page (another port of 127.0.0.1) POSTs to
    itself and answers 307 to the dashboard's cancel route. Chromium repeats the POST there with
    ``Origin: null``, ``Sec-Fetch-Site: same-site`` — and the SameSite=Strict cookie."""
    d = browser
    sign_in(d, served)
    task = queued_task(served)
    target = f"{served.base}/tasks/{task}/cancel"
    before = hostile.redirected
    d.get(f"{hostile.same_site}/redirector?to={quote(target, safe='')}&by=mallory&note=csrf")  # type: ignore[attr-defined]
    _landed(d, target)
    assert hostile.redirected == before + 1  # the 307 was followed to the dashboard
    assert "refused" in page_text(d)
    assert state(served, task) == "queued"


@pytest.mark.parametrize("where", ["cross_site", "same_site"])
def test_a_login_form_elsewhere_cannot_swap_the_session(
    browser: object, served: Serve, hostile: HostileSite, where: str
) -> None:
    d = browser
    sign_in(d, served, "adm")
    target = f"{served.base}/login"
    origin = getattr(hostile, where)
    d.get(f"{origin}/autosubmit?action={quote(target, safe='')}&token=rd")  # type: ignore[attr-defined]
    _landed(d, served.base + "/")
    assert cookie(d, served) == "adm"  # still the admin's own session, not the read token


def test_pages_run_under_the_content_security_policy(browser: object, served: Serve) -> None:
    """Every page renders styled and htmx works with nothing inline allowed: the console
    reports no policy violation."""
    d = browser
    sign_in(d, served)
    task = queued_task(served)
    d.get_log("browser")  # type: ignore[attr-defined]  # start from an empty console
    for path in ("/", f"/tasks/{task}", "/queues", "/dead", "/cron", "/login"):
        d.get(served.base + path)  # type: ignore[attr-defined]
        _landed(d, served.base + path)
        background = d.execute_script(  # type: ignore[attr-defined]
            "return getComputedStyle(document.body).backgroundColor"
        )
        assert background == "rgb(246, 247, 249)", (path, background)  # dashboard.css applied
    # htmx (vendored, no eval, no injected style) still swaps the dead-letter preview in
    d.get(served.base + "/dead")  # type: ignore[attr-defined]
    _css(d, "#preview-btn").click()  # type: ignore[attr-defined]
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(d, 10).until(lambda x: _css(x, "#preview #preview-body"))
    assert d.current_url == served.base + "/dead"  # type: ignore[attr-defined]
    problems = [
        e["message"]
        for e in d.get_log("browser")  # type: ignore[attr-defined]
        if "Content Security Policy" in e["message"] or "Refused to" in e["message"]
    ]
    assert problems == []


def test_sign_out_ends_the_session(browser: object, served: Serve) -> None:
    d = browser
    sign_in(d, served)
    _css(d, "#sign-out").click()  # type: ignore[attr-defined]
    _landed(d, served.base + "/login")
    assert cookie(d, served) is None
    d.get(served.base + "/")  # type: ignore[attr-defined]
    assert "sign in" in page_text(d)  # 401: the cookie is gone


@pytest.fixture
def hostile_names(tmp_path: Path) -> Iterator[tuple[Serve, dict[str, str]]]:
    url = f"sqlite:///{tmp_path}/names.db"
    ids = seed_hostile(url)
    s = Serve(tmp_path, url)
    try:
        yield s, ids
    finally:
        s.stop()


def test_resume_on_a_queue_with_a_hostile_name_resumes_that_queue(
    browser: object, hostile_names: tuple[Serve, dict[str, str]]
) -> None:
    s, ids = hostile_names
    d = browser
    sign_in(d, s)
    d.get(s.base + "/queues")  # type: ignore[attr-defined]
    row = f'#queues .queue-row[data-queue="{HOSTILE_QUEUE}"]'
    assert "paused" in _css(d, f"{row} .qstatus").text  # type: ignore[attr-defined]
    _css(d, f"{row} input[name=by]").send_keys("ops")  # type: ignore[attr-defined]
    _css(d, f"{row} input[name=note]").send_keys("maintenance over")  # type: ignore[attr-defined]
    _css(d, f"{row} .resume-btn").click()  # type: ignore[attr-defined]
    _landed(d, s.base + "/queues?")
    assert "resumed" in _css(d, "#outcome").text  # type: ignore[attr-defined]
    assert HOSTILE_QUEUE in _css(d, "#outcome").text  # type: ignore[attr-defined]
    queues = httpx.get(s.base + "/api/queues", headers=ADM).json()["queues"]
    assert next(q for q in queues if q["queue"] == HOSTILE_QUEUE)["paused"] is False
    assert state(s, ids["target"]) == "queued"  # task 17 untouched


def test_a_tenant_bound_dashboard_names_no_other_tenants_queue(
    browser: object, hostile_names: tuple[Serve, dict[str, str]]
) -> None:
    s, ids = hostile_names
    d = browser
    sign_in(d, s, "ta")
    source = d.page_source  # type: ignore[attr-defined]
    assert f'data-id="{ids["mine"]}"' in source
    assert OTHER_TENANTS_QUEUE not in source and HOSTILE_QUEUE not in source
