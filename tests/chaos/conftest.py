"""Fixtures of the chaos tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Store, make_store


@pytest.fixture
def pg_store(tmp_path: Path) -> Iterator[Store]:
    """A fresh PostgreSQL store; the invariant check runs on it after the test."""
    s = make_store("postgres", tmp_path)
    try:
        yield s
        if s.apps:
            assert s.apps[0].check() == []
    finally:
        s.close()
