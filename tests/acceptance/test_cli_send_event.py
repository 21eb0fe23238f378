"""``jobtrail send-event`` through the real CLI (subprocesses on a SQLite file): it wakes the
task waiting for the key, a repeat wakes nothing, and bad input exits 2 with nothing stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_ops import Cli

import jobtrail


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_send_event_wakes_the_waiting_task(cli: Cli) -> None:
    cli("migrate")
    with jobtrail.App(cli.url) as app:

        @app.task("verify")
        def verify(ctx: Any, p: Any) -> Any:
            return ctx.wait_for_event(p["key"])

        mine = app.enqueue("verify", {"key": "verified:7"}).id
        theirs = app.enqueue("verify", {"key": "verified:7"}, tenant="acme").id
        app.run_worker(burst=True, poll_interval=0.05)
        assert app.get(mine).state == "waiting"

        for args, says in (
            (("",), "event key is empty"),
            (("k" * 256,), "longer than 255"),
            (("verified:7", "{nope"), "PAYLOAD_JSON is not valid JSON"),
            (("verified:7", "1", "--tenant", "t" * 256), "tenant"),
        ):
            err = cli("send-event", *args, code=2).stderr
            assert says in err, err
        assert app.get(mine).state == "waiting"  # nothing stored

        out = cli("send-event", "verified:7", '{"at": "noon"}').stdout
        assert out.strip() == "event 'verified:7' sent; woke 1 task(s)"
        assert cli.json("send-event", "verified:7", "2") == {
            "key": "verified:7",
            "tenant": "",
            "woken": 0,
        }
        zh = cli("send-event", "verified:7", "--tenant", "acme", "--lang", "zh").stdout
        assert "唤醒了 1 个任务" in zh
        app.run_worker(burst=True, poll_interval=0.05)
        assert app.get(mine).result == {"at": "noon"}
        assert app.get(theirs).state == "succeeded" and app.get(theirs).result is None
