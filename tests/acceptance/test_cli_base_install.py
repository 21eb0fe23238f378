"""``pip install jobtrail`` (no extra) brings the library, the worker and the CLI on both
backends; the HTTP API, the dashboard and /metrics come with ``jobtrail[server]``.

These run the real code in subprocesses where the server extra's modules cannot be imported
(a ``sitecustomize`` refuses them, as on a base install) and record every attempt to import
one: the core must make none. ``.ci/run``'s wheel step does the same from the built wheel in a
fresh venv, where the modules are really absent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Store

from jobtrail import __version__

#: the server extra's import names (pyproject.toml's ``server``)
SERVER_MODULES = (
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "prometheus_client",
    "multipart",
    "python_multipart",
    "jinja2",
    "markupsafe",
)

SITECUSTOMIZE = textwrap.dedent(f"""
    import os, sys

    BLOCKED = {SERVER_MODULES!r}
    LOG = os.environ["JOBTRAIL_TEST_IMPORT_LOG"]


    class BaseInstall:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                with open(LOG, "a") as log:
                    log.write(name + "\\n")
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None


    sys.meta_path.insert(0, BaseInstall())
""")

APP = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("echo")
    def echo(ctx, payload):
        return payload
""")

LIBRARY = textwrap.dedent("""
    import sys

    import jobtrail, jobtrail.cli
    from tasks_app import app

    app.migrate()
    task = app.enqueue("echo", {"n": 1})
    assert app.run_worker(burst=True) == 1
    assert app.result(task.id) == {"n": 1}
    print(app.explain(task.id))
    app.close()
    loaded = [m for m in sys.modules if m.split(".")[0] in %r]
    assert not loaded, loaded
""")


@pytest.fixture
def base_install(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "tasks_app.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(tmp_path)])
    env["JOBTRAIL_TEST_IMPORT_LOG"] = str(tmp_path / "imports.log")
    return tmp_path, env


def attempts(env: dict[str, str]) -> list[str]:
    path = Path(env["JOBTRAIL_TEST_IMPORT_LOG"])
    return path.read_text().split() if path.exists() else []


def run(cwd: Path, env: dict[str, str], *argv: str, code: int = 0) -> str:
    proc = subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == code, (argv, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout + proc.stderr


def test_the_blocker_blocks(base_install: tuple[Path, dict[str, str]]) -> None:
    """The test's own control: an import of the server parts is refused and recorded."""
    cwd, env = base_install
    out = run(cwd, env, "-c", "import jobtrail.web", code=1)
    assert "No module named 'fastapi'" in out
    assert attempts(env) == ["fastapi"]


def test_the_library_and_worker_import_nothing_of_the_server(
    store: Store, base_install: tuple[Path, dict[str, str]]
) -> None:
    cwd, env = base_install
    env = {**env, "JOBTRAIL_DATABASE_URL": store.url, **store.env()}
    out = run(cwd, env, "-c", LIBRARY % (SERVER_MODULES,))
    assert "state:      succeeded" in out
    assert attempts(env) == []


def test_the_cli_imports_nothing_of_the_server_and_serve_names_the_extra(
    base_install: tuple[Path, dict[str, str]],
) -> None:
    cwd, env = base_install
    jobtrail = ["-m", "jobtrail"]
    app = ["--app", "tasks_app:app"]
    assert run(cwd, env, *jobtrail, "--version") == f"jobtrail {__version__}\n"
    run(cwd, env, *jobtrail, "migrate")
    run(cwd, env, *jobtrail, "enqueue", "echo", "{}", *app)
    run(cwd, env, *jobtrail, "worker", "--burst", *app)
    assert "echo" in run(cwd, env, *jobtrail, "list")
    assert attempts(env) == []
    # serve and the dashboard say which extra, in one line, with the usage exit code
    for argv, what in (
        ([*jobtrail, "serve", *app], "jobtrail: error: serve needs"),
        ([*jobtrail, "dashboard", *app], "jobtrail: error: the dashboard needs"),
    ):
        out = run(cwd, env, *argv, code=2)
        assert out.startswith(what) and out.count("\n") == 1, out
        assert "pip install 'jobtrail[server]'" in out, out
