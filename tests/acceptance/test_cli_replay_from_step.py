"""Replay from a step through the real ``jobtrail`` CLI (subprocesses on a SQLite file):
``replay-preview --from-step`` names what runs again, ``replay --from-step`` resumes there, and a
name the task did not record exits 2 with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_ops import Cli

import jobtrail


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _app(url: str, calls: dict[str, int], broken: list[bool]) -> jobtrail.App:
    app = jobtrail.App(url)

    @app.task("order", max_attempts=1)
    def order(ctx: Any, payload: Any) -> None:
        def count(name: str) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return name

        ctx.step("reserve", lambda: count("reserve"))

        def charge(key: str) -> dict[str, str]:
            count("charge")
            return {"id": f"ch_{calls['charge']}"}

        ctx.effect("charge", charge)

        def ship() -> str:
            count("ship")
            if broken[0]:
                raise jobtrail.PermanentError("no carrier", category="invalid_input")
            return "sent"

        ctx.step("ship", ship)

    return app


def test_replay_from_a_step_through_the_cli(cli: Cli) -> None:
    cli("migrate")
    calls: dict[str, int] = {}
    broken = [True]
    app = _app(cli.url, calls, broken)
    task_id = app.enqueue("order", {}).id
    app.run_worker(burst=True, poll_interval=0.05)
    assert app.get(task_id).state == "dead"

    out = cli("replay-preview", task_id, "--from-step", "charge").stdout
    assert f"task {task_id} (order, dead): a replay from step 'charge' would" in out
    assert "forget and run again: charge" in out
    assert "performs again: charge" in out
    plain = cli("replay-preview", task_id).stdout
    assert "forget nothing" in plain and "skips (confirmed): charge (ch_1)" in plain
    zh = cli("replay-preview", task_id, "--from-step", "charge", "--lang", "zh").stdout
    assert "遗忘并再次运行：charge" in zh
    data = cli.json("replay-preview", task_id, "--from-step", "reserve")
    assert data["forgotten"] == ["reserve", "charge"] and data["replayable"] is True

    before = [t.to_dict() for t in app.transitions(task_id)]
    err = cli("replay", task_id, "--by", "ops", "--note", "n", "--from-step", "nope", code=2)
    assert "from_step 'nope'" in err.stderr and "'reserve', 'charge'" in err.stderr
    err = cli("replay", task_id, "--by", "ops", "--note", "n", "--from-step", "", code=2)
    assert "from_step must be a step name" in err.stderr
    assert [t.to_dict() for t in app.transitions(task_id)] == before

    out = cli("replay", task_id, "--by", "ops", "--note", "carrier back", "--from-step", "charge")
    assert "replay #1 from step 'charge', forgot: charge" in out.stdout
    broken[0] = False
    app.run_worker(burst=True, poll_interval=0.05)
    assert app.get(task_id).state == "succeeded"
    assert calls == {"reserve": 1, "charge": 2, "ship": 2}
    app.close()
