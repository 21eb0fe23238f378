"""The headless Chromium the browser tests drive (selenium + Debian's chromium-driver): a
test module imports the ``browser`` fixture from here (as ``browser_fixture``; a conftest.py
in this folder would shadow tests/conftest.py, which other tests import as ``conftest``).

Skipped with a reason when /usr/bin/chromium or chromedriver is missing, except under
``CI=true`` where that is a failure. One browser (one fresh profile) per test module.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _require_chromium() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        reason = f"{' and '.join(missing)} missing: apt-get install -y chromium chromium-driver"
        if IN_CI:
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module", name="browser")
def browser_fixture() -> Iterator[object]:
    _require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="jobtrail-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
