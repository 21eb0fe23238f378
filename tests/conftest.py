"""Shared fixtures: a fresh store per test on each backend, and the invariant check after it.

SQLite: a new file per test. PostgreSQL: a new schema per test in the database named by
``JOBTRAIL_TEST_PG_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``). Under
``CI=true`` a PostgreSQL test that cannot connect fails; elsewhere it is skipped.
``pgbouncer-tx``: the same PostgreSQL through a real PgBouncer in ``pool_mode=transaction``
(``tests/bouncer.py``) with ``App(pooler="transaction")``, for the tests in ``POOLED_SCOPE``
that take ``backend``, but those in ``NOT_POOLED``; ``pgbouncer-tx-auto``: the same PgBouncer
with ``pooler=`` not set (the App must find the pooler by itself), for the tests in
``AUTO_SCOPE``. ``JOBTRAIL_TEST_POOLED`` says whether a run takes these pooled cases, only
them, or none (``POOLED`` below).

Under ``CI=true`` no test may skip at all: a test that needs something the machine lacks
(PostgreSQL, root for a private cluster, Chromium, schemathesis) calls ``unavailable(reason)``,
which fails there and skips elsewhere, and any other skip is turned into a failure by
``pytest_runtest_makereport`` below, so CI cannot go green with a part of the suite unrun.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

import psycopg
import pytest
from bouncer import Bouncer
from bouncer import available as pgbouncer_available

import jobtrail

PG_URL = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BACKENDS = ["sqlite", "postgres"]
#: Which ``pgbouncer-tx`` cases a run collects: ``all`` (the default: the ``backend``-
#: parametrised tests of ``POOLED_SCOPE`` also run through PgBouncer in transaction mode), ``only``
#: (just those, the way ``.ci/run`` runs them in a process of their own beside the main run) or
#: ``skip`` (none: the main run of ``.ci/run``, while that process covers them).
POOLED = os.environ.get("JOBTRAIL_TEST_POOLED", "all").strip().lower() or "all"
if POOLED not in ("all", "only", "skip"):
    raise pytest.UsageError(f"JOBTRAIL_TEST_POOLED={POOLED!r}: expected 'all', 'only' or 'skip'")
#: Which part of the suite a run collects: ``all`` (the default), ``processes`` (the tests that
#: drive real processes — the CLI, the server, Chromium, crashes and races of worker
#: processes, the chaos soak — and mostly wait on them: ``PROCESS_PARTS``), one of its two
#: halves ``processes-1`` (``FIRST_HALF``: the CLI, the benchmarks' smoke runs and the real
#: server's HTTP tests, about half of its time in CI) and
#: ``processes-2`` (the rest of it), or ``rest`` (everything else). ``.ci/run`` runs the halves
#: and the rest side by side, so its wall time is not the sum of the waits.
PARTS = ("all", "processes", "processes-1", "processes-2", "rest")
PART = os.environ.get("JOBTRAIL_TEST_PART", "all").strip().lower() or "all"
if PART not in PARTS:
    raise pytest.UsageError(f"JOBTRAIL_TEST_PART={PART!r}: expected one of {', '.join(PARTS)}")
PROCESS_PARTS = (
    "tests/acceptance/",
    "tests/browser/",
    "tests/chaos/",
    "tests/integration/",
)
FIRST_HALF = (
    "tests/acceptance/test_cli",
    "tests/acceptance/test_bench",
    "tests/acceptance/test_http",
)


def part_of(nodeid: str) -> str:
    """``processes-1``, ``processes-2`` or ``rest``: where a test runs in a split run."""
    if not nodeid.startswith(PROCESS_PARTS):
        return "rest"
    return "processes-1" if nodeid.startswith(FIRST_HALF) else "processes-2"


def in_part(nodeid: str) -> bool:
    """Whether ``JOBTRAIL_TEST_PART`` takes this test."""
    part = part_of(nodeid)
    return PART in ("all", part) or (PART == "processes" and part != "rest")


#: Where ``pgbouncer-tx`` cases run (issue 18: the conformance and crash tests' PostgreSQL
#: cases through the pooler): the conformance suites of the whole store and of the driver, the
#: checker, the crash tests, the races of worker processes, and the entry points run as
#: subprocesses (the CLI, the real server, the FastAPI example, the dashboard in Chromium), which
#: are given the pooler through ``JOBTRAIL_POOLER``. Elsewhere the ``backend`` parameter is about
#: ``doctor`` (which reports a transaction pooler), Django, or a query plan read on a direct
#: session; the pooler's own tests are in ``tests/integration/test_pooler.py``.
POOLED_SCOPE = (
    "tests/conformance/",
    "tests/driver/",
    "tests/reliability/",
    "tests/integration/test_crash.py",
    "tests/integration/test_effect_crash.py",
    "tests/integration/test_races.py",
    "tests/integration/test_cron_race.py",
    "tests/integration/test_limits_race.py",
    "tests/integration/test_rates_processes.py",
    "tests/acceptance/test_cli_errors.py",
    "tests/acceptance/test_cli_hostile.py",
    "tests/acceptance/test_http.py",
    "tests/acceptance/test_http_hostile.py",
    "tests/acceptance/test_fastapi_example.py",
    "tests/browser/test_dashboard.py",
    "tests/browser/test_dashboard_zh.py",
)
#: Where ``pgbouncer-tx-auto`` cases run (the same PgBouncer, ``pooler=`` not set; issue 38):
#: the conformance suite and the crash and race tests of worker processes, the part of
#: ``POOLED_SCOPE`` that shows a task runs once. The rest of ``POOLED_SCOPE`` would double the
#: pooled run's ~580 cases for paths the driver takes alike once it has found the pooler.
AUTO_SCOPE = (
    "tests/conformance/",
    "tests/integration/test_crash.py",
    "tests/integration/test_effect_crash.py",
    "tests/integration/test_races.py",
)
#: The pooled backends: ``pooler="transaction"`` given, and not given.
POOLED_BACKENDS = {"pgbouncer-tx": POOLED_SCOPE, "pgbouncer-tx-auto": AUTO_SCOPE}
#: The tests in scope that do not run through a transaction pooler, each for a session feature
#: such a pooler cannot give (test id without its ``[...]``: why, and the test of what the
#: pooled store does instead).
NOT_POOLED: dict[str, str] = {
    "tests/conformance/test_results.py::test_the_finish_watch_is_woken_by_a_completion": (
        "a wake-up needs a LISTEN session: without listen_url the watch polls, with one it "
        "listens there (test_pooler.py::test_a_result_wait_behind_a_transaction_pooler_*)"
    ),
    "tests/driver/test_driver.py::test_watch_finished": (
        "the same watch at the driver's level (test_pooler.py::"
        "test_a_result_wait_behind_a_transaction_pooler_*)"
    ),
}


def pg_available() -> str | None:
    """``None`` when PostgreSQL answers, else the reason it does not."""
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_URL} is unreachable: {exc}"


def unavailable(reason: str) -> NoReturn:
    """A test cannot run here: fail under ``CI=true`` (CI must run everything), else skip."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def require_pg() -> None:
    reason = pg_available()
    if reason is not None:
        unavailable(reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``CI=true`` a skip is a failure, whoever raised it (``skipif``, ``importorskip``,
    a fixture that skips): CI runs every test or fails."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI=true and the test skipped: {reason}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Select the ``pgbouncer-tx`` cases: by ``JOBTRAIL_TEST_POOLED``, then those in
    ``POOLED_SCOPE`` but not in ``NOT_POOLED``; and the part of the suite
    (``JOBTRAIL_TEST_PART``)."""
    keep, drop = [], []
    for item in items:
        if not in_part(item.nodeid):
            drop.append(item)
            continue
        callspec = getattr(item, "callspec", None)
        scope = POOLED_BACKENDS.get(callspec.params.get("backend")) if callspec else None
        if scope is not None:
            test = item.nodeid.split("[", 1)[0]
            wanted = POOLED != "skip" and test.startswith(scope) and test not in NOT_POOLED
        else:
            wanted = POOLED != "only"
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


_bouncer: Bouncer | None = None


def bouncer() -> Bouncer:
    """The test session's PgBouncer (started on first use; ``unavailable`` without one)."""
    global _bouncer
    reason = pgbouncer_available()
    if reason is not None:
        unavailable(reason)
    if _bouncer is None:
        _bouncer = Bouncer(PG_URL)
        _bouncer.start()
    elif not _bouncer.running:  # a test killed it and did not restart it
        _bouncer.start()
    return _bouncer


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _bouncer is not None:
        _bouncer.close()


def schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"


class Store:
    """A fresh, empty store for one test; ``url`` works in subprocesses too."""

    def __init__(
        self,
        backend: str,
        url: str,
        cleanup: Callable[[], None],
        options: dict[str, str] | None = None,
        direct_url: str | None = None,
    ) -> None:
        self.backend = backend
        self.url = url
        self._cleanup = cleanup
        #: what every App on this store is given (``pooler`` behind PgBouncer)
        self.options: dict[str, str] = options or {}
        #: the store without any pooler in between (the same as ``url`` unless pooled)
        self.direct_url = direct_url or url
        self.apps: list[jobtrail.App] = []

    @property
    def postgres(self) -> bool:
        return self.backend != "sqlite"

    def env(self) -> dict[str, str]:
        """Environment for a subprocess App on this store (``JOBTRAIL_POOLER``)."""
        return {"JOBTRAIL_POOLER": self.options["pooler"]} if "pooler" in self.options else {}

    def app(self, **options: object) -> jobtrail.App:
        app = jobtrail.App(self.url, **{**self.options, **options})  # type: ignore[arg-type]
        app.migrate()
        self.apps.append(app)
        return app

    def close(self) -> None:
        for app in self.apps:
            app.close()
        self._cleanup()


def make_store(backend: str, tmp_path: Path) -> Store:
    if backend == "sqlite":
        path = tmp_path / "jobtrail.db"
        return Store(backend, f"sqlite:///{path}", lambda: None)
    require_pg()
    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')

    pooled = bouncer().add(schema) if backend in POOLED_BACKENDS else None

    def drop() -> None:
        if pooled is not None and _bouncer is not None:
            _bouncer.remove(schema)
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    if pooled is not None:
        return Store(
            backend,
            pooled["transaction"],
            drop,
            {"pooler": "transaction"} if backend == "pgbouncer-tx" else {},
            direct_url=schema_url(schema),
        )
    return Store(backend, schema_url(schema), drop)


@pytest.fixture(params=[*BACKENDS, *POOLED_BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    s = make_store(backend, tmp_path)
    # behind PgBouncer, an App a test (or a process it spawns) makes without ``store.app``
    # is told the pooler the way a deployment would tell it
    for name, value in s.env().items():
        monkeypatch.setenv(name, value)
    try:
        yield s
        # The invariant every test that ran tasks must keep: each task's state is the
        # to_state of its last transition, and its log is contiguous.
        if s.apps:
            violations = s.apps[0].check()
            assert violations == [], f"invariant violated: {violations}"
    finally:
        s.close()


@pytest.fixture
def app(store: Store) -> jobtrail.App:
    return store.app()


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Store]:
    """A fresh PostgreSQL store, for the tests of paths only the PostgreSQL driver has."""
    s = make_store("postgres", tmp_path)
    try:
        yield s
    finally:
        s.close()
