"""The database a verb uses is never a surprise (issue 38, SPEC "No silent new database" and
"One URL masker"), through the real ``jobtrail`` command.

Found: from another directory, ``jobtrail enqueue … --db sqlite:///app.db`` and ``jobtrail
worker`` silently created and used a new empty file; ``migrate``, ``doctor`` and
``SchemaMissing`` printed a password given as ``?password=``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _worker_log import stray_traceback
from conftest import Store

APP = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("echo")
    def echo(ctx, payload):
        return payload
""")
SECRET = "s3cr3t-PW"


def run(
    cwd: Path, *args: str, code: int = 0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    base["PYTHONPATH"] = os.pathsep.join([str(cwd / "code"), str(cwd.parent / "code")])
    proc = subprocess.run(
        [sys.executable, "-m", "jobtrail", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert not stray_traceback(proc.stderr), proc.stderr
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory with no database in it; the app module lives in another one."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "tasks_app.py").write_text(APP)
    (tmp_path / "elsewhere").mkdir()
    return tmp_path / "elsewhere"


VERBS = {
    "enqueue": ["enqueue", "echo", "{}", "--app", "tasks_app:app"],
    "worker": ["worker", "--app", "tasks_app:app", "--burst"],
    "serve": ["serve", "--port", "0", "--app", "tasks_app:app"],
    "list": ["list"],
}


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("how", ["--db", "env"])
def test_only_migrate_creates_a_sqlite_file(elsewhere: Path, verb: str, how: str) -> None:
    args, env = list(VERBS[verb]), {}
    if how == "--db":
        args += ["--db", "sqlite:///app.db"]
    else:
        env["JOBTRAIL_DATABASE_URL"] = "sqlite:///app.db"
    absolute = elsewhere / "app.db"
    proc = run(elsewhere, *args, code=3, env=env)
    line = proc.stderr
    assert line.startswith("jobtrail: error: ") and line.count("\n") == 1, line
    assert f"no database file at {absolute}" in line
    assert f"run `jobtrail migrate --db sqlite:///{absolute}`" in line
    assert os.listdir(elsewhere) == []  # nothing created, not even an empty file


def test_migrate_creates_it_and_names_the_absolute_path_everywhere(elsewhere: Path) -> None:
    absolute = elsewhere / "app.db"
    db = ["--db", "sqlite:///app.db"]
    out = run(elsewhere, "migrate", *db).stdout
    assert out.startswith(f"created the SQLite database {absolute}\n"), out
    assert f"to sqlite:///{absolute}" in out
    assert absolute.exists()
    again = run(elsewhere, "migrate", *db).stdout
    assert again == f"sqlite:///{absolute} is up to date\n"  # created once, said once
    out = run(elsewhere, "enqueue", "echo", '{"n": 1}', "--app", "tasks_app:app", *db).stdout
    assert f"of sqlite:///{absolute}" in out, out
    proc = run(elsewhere, "worker", "--app", "tasks_app:app", "--burst", *db)
    start = next(line for line in proc.stderr.splitlines() if "worker" in line)
    assert f"database=sqlite:///{absolute}" in start, proc.stderr
    assert "processed 1" in proc.stdout


def test_the_worker_and_enqueue_bring_an_existing_files_schema_forward(
    elsewhere: Path,
) -> None:
    """An existing file without the schema (an empty file someone made) is migrated by the
    verbs that always did: only a missing file is refused."""
    (elsewhere / "app.db").write_bytes(b"")
    db = ["--db", "sqlite:///app.db"]
    out = run(elsewhere, "enqueue", "echo", "{}", "--app", "tasks_app:app", *db).stdout
    assert out.startswith("enqueued task 1 (echo)"), out


def secret_url(store: Store) -> str:
    """The test store's URL with a password in the user info and in both query parameters
    (the test server trusts every local connection: a password is accepted and ignored)."""
    url = store.url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1)
    assert SECRET in url, url
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}password={SECRET}&sslpassword={SECRET}"


def test_no_verb_prints_a_password(pg: Store, tmp_path: Path) -> None:
    url = secret_url(pg)
    seen = []
    # SchemaMissing (a read of the unmigrated schema), doctor's schema check, migrate, and the
    # worker's start line
    seen.append(run(tmp_path, "list", "--db", url, code=3))
    seen.append(run(tmp_path, "doctor", "--db", url, code=1))
    seen.append(run(tmp_path, "doctor", "--db", url, "--json", code=1))
    seen.append(run(tmp_path, "migrate", "--db", url))
    seen.append(run(tmp_path, "migrate", "--db", url, "--json"))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "tasks_app.py").write_text(APP)
    seen.append(run(tmp_path, "worker", "--app", "tasks_app:app", "--burst", "--db", url))
    for proc in seen:
        assert SECRET not in proc.stdout + proc.stderr, (proc.args, proc.stdout, proc.stderr)
    text = seen[0].stderr + seen[1].stdout + seen[3].stdout
    assert "password=***&sslpassword=***" in text and "postgres:***@" in text, text
