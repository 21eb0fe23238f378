"""Fixtures of the SQLite-only driver tests: a migrated store file, and drivers on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobtrail
from jobtrail.store.sqlite.driver import SQLiteDriver


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A migrated SQLite store of the test's own."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with jobtrail.App(url) as app:
        app.migrate()
    return url


@pytest.fixture
def make_driver(url: str) -> Iterator[Callable[..., SQLiteDriver]]:
    """SQLite drivers on ``url`` (options as ``SQLiteDriver`` takes them), closed at the end."""
    made: list[SQLiteDriver] = []

    def make(**options: Any) -> SQLiteDriver:
        made.append(SQLiteDriver(url, **options))
        return made[-1]

    yield make
    for driver in made:
        driver.close()
