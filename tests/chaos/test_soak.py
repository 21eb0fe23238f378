"""The chaos soak, small enough for CI (``bench/soak.py`` runs it big): worker processes
SIGKILLed at random and restarted, transient errors at random, a provider ledger outside the
workers; on PostgreSQL also the fault proxy between workers and the server and one server
restart in the middle (a private throwaway cluster, never the shared server)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import unavailable

import jobtrail

from . import soak
from ._chaos_support import wait_until  # noqa: F401  (puts tests/integration on sys.path)

TASKS = int(os.environ.get("JOBTRAIL_SOAK_TASKS", "200"))


def _assert_clean(res: soak.Result) -> None:
    print(soak.report(res))
    assert res.problems == [], res.problems
    assert res.violations == [], res.violations[:10]
    assert res.log_errors == [], res.log_errors[:10]
    assert res.kills >= 1
    assert sum(res.states.values()) == TASKS


@pytest.mark.timeout(300)
def test_soak_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'soak.db'}"
    with jobtrail.App(url) as app:
        app.migrate()
    res = soak.run(
        root=tmp_path, url=url, tasks=TASKS, workers=3, kill_every=4, timeout=200, seed=4
    )
    _assert_clean(res)


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    from test_pg_restart import PrivateCluster, _pg_version

    version = _pg_version()
    if version is None or os.geteuid() != 0 or shutil.which("runuser") is None:
        unavailable("needs a local PostgreSQL installation and root for a private cluster")
    srv = PrivateCluster(version)
    try:
        yield srv
    finally:
        srv.close()


@pytest.mark.timeout(300)
def test_soak_postgres(tmp_path: Path, cluster: object) -> None:
    url = cluster.url  # type: ignore[attr-defined]
    with jobtrail.App(url) as app:
        app.migrate()
    res = soak.run(
        root=tmp_path,
        url=url,
        tasks=TASKS,
        workers=3,
        kill_every=6,
        cut_every=5,
        timeout=240,
        seed=4,
        pg_restart=cluster,
    )
    assert res.pg_restarts == 1 and res.proxy_cuts >= 1
    _assert_clean(res)
