"""``jobtrail enqueue --concurrency-key``, run as a subprocess against a fresh SQLite file:
the key is stored and its queue's claims keep to it; a bad key exits 2 and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import APP_MODULE, Cli

import jobtrail


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    (tmp_path / "cliapp.py").write_text(APP_MODULE)
    c = Cli(tmp_path)
    c("migrate")
    return c


def test_enqueue_with_a_concurrency_key(cli: Cli) -> None:
    first = cli.json("enqueue", "echo", '{"n": 1}', "--concurrency-key", "account:42", app=True)
    second = cli.json("enqueue", "echo", '{"n": 2}', "--concurrency-key", "account:42", app=True)
    app = jobtrail.App(cli.env["JOBTRAIL_DATABASE_URL"])
    try:
        with app._driver.transaction() as tx:
            rows = [app._driver.task_get(tx, int(t["id"])) for t in (first, second)]
        assert [r["ckey"] for r in rows if r] == ["account:42", "account:42"]
    finally:
        app.close()


@pytest.mark.parametrize(
    ("key", "message"),
    [("", "--concurrency-key: concurrency_key must be a non-empty"), ("x" * 256, "at most 255")],
)
def test_a_bad_concurrency_key_exits_2_and_writes_nothing(cli: Cli, key: str, message: str) -> None:
    err = cli("enqueue", "echo", "{}", "--concurrency-key", key, app=True, code=2).stderr
    assert message in err
    assert cli.json("list") == []
