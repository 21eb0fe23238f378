"""Run Django's own task-framework tests against ``JobtrailBackend``.

    python tests/contrib_django/upstream/run.py --database sqlite|postgresql [--src DIR]

The tests are not copied here: the source distribution of the installed Django release is
fetched from the package index (``pip download --no-binary :all: --no-deps django==X``; it ships
``tests/``) into a cache directory, and its ``tests/tasks`` modules run under Django's own test
runner, against jobtrail, so a Django release that changes the contract fails this run. What
is adapted is listed here and in ``standins.py``, nothing else:

1. where the tests name ``DummyBackend``/``ImmediateBackend``, they get jobtrail's stand-ins
   (``standins.py``): ``Recording`` and ``Burst`` (a burst worker in place of running the task
   inside ``enqueue``);
2. the tests in ``NOT_APPLICABLE`` are skipped, each with its reason (they test what only the
   dummy or immediate backend does, by design unlike a durable backend);
3. ``test_custom_backend`` is not run: it tests a backend class of its own.

The test databases are Django's own (created and dropped by its runner), jobtrail's tables put
in them with ``call_command("jobtrail", "migrate")``. Exit status 0 when all pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES = ["tasks.test_tasks", "tasks.test_dummy_backend", "tasks.test_immediate_backend"]

#: Django's tests that do not apply to a durable backend, and why.
NOT_APPLICABLE = {
    "tasks.test_dummy_backend.DummyBackendTestCase.test_refresh_result": (
        "edits the dummy backend's in-memory store; jobtrail's store is the database "
        "(refresh is run by test_tasks.test_refresh_result and the burst tests)"
    ),
    "tasks.test_dummy_backend.DummyBackendTestCase.test_refresh_result_async": (
        "edits the dummy backend's in-memory store (as test_refresh_result)"
    ),
    "tasks.test_dummy_backend.DummyBackendTestCase.test_clear": (
        "clear() empties the dummy backend's store; jobtrail's tasks are durable"
    ),
    "tasks.test_immediate_backend.ImmediateBackendTestCase.test_cannot_get_result": (
        "the immediate backend keeps no results; jobtrail supports get_result"
    ),
    "tasks.test_immediate_backend.ImmediateBackendTestCase.test_cannot_refresh_result": (
        "the immediate backend keeps no results; jobtrail supports refresh"
    ),
    "tasks.test_immediate_backend.ImmediateBackendTestCase.test_cannot_pass_run_after": (
        "the immediate backend refuses run_after; jobtrail supports it"
    ),
    "tasks.test_immediate_backend.ImmediateBackendTestCase.test_throws_keyboard_interrupt": (
        "the immediate backend runs the task in the caller, so its KeyboardInterrupt reaches "
        "the caller; a worker's task cannot interrupt the process that enqueued it"
    ),
    "tasks.test_immediate_backend.ImmediateBackendTransactionTestCase"
    ".test_doesnt_wait_until_transaction_commit_by_default": (
        "jobtrail's enqueue in atomic() is part of that transaction: no worker can run the "
        "task before the commit (docs/django.md, transactional enqueue)"
    ),
}


def django_tests(cache: Path) -> Path:
    """``tests/`` of the installed Django's release, fetched once into ``cache``."""
    import django

    version = django.__version__
    root = cache / f"django-{version}"
    if not (root / "tests" / "tasks" / "test_tasks.py").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-binary",
                ":all:",
                "--no-deps",
                f"django=={version}",
                "-d",
                str(cache),
            ],
            check=True,
        )
        # unpacked beside, then renamed into place: a run beside this one sees all or nothing
        unpacked = Path(tempfile.mkdtemp(dir=cache))
        with tarfile.open(cache / f"django-{version}.tar.gz") as sdist:
            prefix = f"django-{version}/tests/tasks/"
            members = [m for m in sdist.getmembers() if m.name.startswith(prefix)]
            sdist.extractall(unpacked, members=members, filter="data")
        try:
            os.replace(unpacked / f"django-{version}", root)
        except OSError:  # another run put it there first
            pass
        shutil.rmtree(unpacked, ignore_errors=True)
    return root / "tests"


def settings(database: str, tmp: Path) -> dict[str, object]:
    if database == "sqlite":
        dbs = {
            alias: {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(tmp / f"{alias}.db"),
                "TEST": {"NAME": str(tmp / f"test_{alias}.db")},
            }
            for alias in ("default", "burst")
        }
    else:
        from psycopg.conninfo import conninfo_to_dict

        url = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
        info = conninfo_to_dict(url)
        tag = f"{os.getpid()}_{os.urandom(3).hex()}"
        dbs = {
            alias: {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": str(info.get("dbname", "test")),
                "USER": str(info.get("user", "postgres")),
                "PASSWORD": str(info.get("password", "")),
                "HOST": str(info.get("host", "127.0.0.1")),
                "PORT": str(info.get("port", "5432")),
                "TEST": {"NAME": f"jt_upstream_{alias}_{tag}"},
            }
            for alias in ("default", "burst")
        }
    return {
        "DATABASES": dbs,
        "INSTALLED_APPS": ["jobtrail.contrib.django"],
        "USE_TZ": True,
        "SECRET_KEY": "tests-only",
        "TASKS": {
            alias: {"BACKEND": "django.tasks.backends.dummy.DummyBackend", "QUEUES": []}
            for alias in ("default",)
        }
        | {"burst": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}},
    }


def stand_in() -> None:
    """Adaptation 1: Django's two backend names mean jobtrail's stand-ins (before the test
    modules import them)."""
    import django.tasks.backends.dummy as dummy
    import django.tasks.backends.immediate as immediate
    from standins import Burst, Recording

    dummy.DummyBackend = Recording
    immediate.ImmediateBackend = Burst


def not_applicable(suite: unittest.TestSuite) -> int:
    """Adaptation 2: skip each test of ``NOT_APPLICABLE``; a name that Django's tests no
    longer have fails the run (the contract changed: look again)."""
    found = set()

    def walk(s: unittest.TestSuite) -> None:
        for t in s:
            if isinstance(t, unittest.TestSuite):
                walk(t)
                continue
            name = f"{type(t).__module__}.{type(t).__qualname__}.{t._testMethodName}"
            if name in NOT_APPLICABLE:
                found.add(name)
                method = getattr(type(t), t._testMethodName)
                setattr(type(t), t._testMethodName, unittest.skip(NOT_APPLICABLE[name])(method))

    walk(suite)
    missing = set(NOT_APPLICABLE) - found
    for name in sorted(missing):
        print(f"the shim skips {name}, which Django's tests no longer have", file=sys.stderr)
    return len(missing)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], required=True)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "jobtrail-django-tests"
    )
    parser.add_argument("-v", "--verbosity", type=int, default=1)
    parser.add_argument("--durations", type=int, default=None, help="show the N slowest")
    args = parser.parse_args()

    import django
    from django.conf import settings as django_settings

    tests = django_tests(args.cache)
    sys.path[:0] = [str(tests), str(HERE)]
    with tempfile.TemporaryDirectory(prefix="jt-upstream-") as tmp:
        django_settings.configure(**settings(args.database, Path(tmp)))
        django.setup()
        stand_in()
        from django.core.management import call_command
        from django.test.runner import DiscoverRunner

        class Runner(DiscoverRunner):  # type: ignore[misc]
            def get_databases(self, suite: unittest.TestSuite) -> dict[str, bool]:
                return {"default": False, "burst": False}  # the burst worker's too

            def setup_databases(self, **kwargs: object) -> object:
                config = super().setup_databases(**kwargs)
                for alias in ("default", "burst"):
                    call_command("jobtrail", "migrate", backend=alias)
                return config

            def build_suite(self, *a: object, **kw: object) -> unittest.TestSuite:
                suite = super().build_suite(*a, **kw)
                self.missing = not_applicable(suite)
                return suite

            def run_suite(self, suite: unittest.TestSuite, **kw: object) -> object:
                result = super().run_suite(suite, **kw)
                # testsRun leaves the skipped out (Python >= 3.12): count the suite
                self.found, self.skipped = suite.countTestCases(), len(result.skipped)
                return result

        print(f"Django {django.__version__}: tests/tasks on JobtrailBackend, {args.database}")
        runner = Runner(verbosity=args.verbosity, interactive=False, durations=args.durations)
        failures = runner.run_tests(MODULES)
        found, skipped = runner.found, runner.skipped
        for name, why in NOT_APPLICABLE.items():
            print(f"not applicable: {name.removeprefix('tasks.')}: {why}")
        print(
            f"Django {django.__version__} tests/tasks on JobtrailBackend ({args.database}): "
            f"{found} tests, {found - skipped - failures} passed, {skipped} skipped "
            f"({len(NOT_APPLICABLE)} listed as not applicable), {failures} failed"
        )
        return 1 if failures or runner.missing else 0


if __name__ == "__main__":
    sys.exit(main())
