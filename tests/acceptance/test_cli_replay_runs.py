"""Replay runs through the real ``jobtrail`` CLI (subprocesses on a SQLite file): ``dead-preview``
with the effects a replay performs again and skips, ``replay-dead --batch-size
--stop-after-failures`` stopping while a worker (in this process) fails the replayed tasks
again, ``replay-runs`` printing the stopped run, and ``dead`` with its evidence."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_cli_ops import Cli

import jobtrail
from jobtrail.worker import Worker, WorkerOptions


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _app(url: str) -> jobtrail.App:
    app = jobtrail.App(url, version="v7")

    @app.task("publish", max_attempts=1)
    def publish(ctx: Any, payload: Any) -> None:
        ctx.effect("upload", lambda key: {"id": f"img-{key}"})

        def submit(key: str) -> None:
            raise ConnectionResetError("reset while submitting")  # uncertain: not a refusal

        ctx.effect("submit", submit)

    return app


def test_preview_a_stopped_replay_run_and_the_evidence(cli: Cli) -> None:
    cli("migrate")
    app = _app(cli.url)
    ids = [app.enqueue("publish", {"n": i}, idempotency_key=f"post-{i}").id for i in range(6)]
    app.run_worker(burst=True, poll_interval=0.05)
    assert all(app.get(i).state == "dead" for i in ids)

    out = cli("dead-preview", "--kind", "publish").stdout
    assert out.startswith("6 dead task(s) a replay would touch (dead before ")
    assert out.count("performs again: submit") == 6
    assert f"skips (confirmed): upload (img-{ids[0]}/upload)" in out
    preview = cli.json("dead-preview", "--kind", "publish", "--limit", "2")
    assert len(preview["tasks"]) == 2
    assert [e["name"] for e in preview["tasks"][0]["effects"]["again"]] == ["submit"]
    assert "将再次执行：submit" in cli("dead-preview", "--kind", "publish", "--lang", "zh").stdout

    # refused before anything is written
    err = cli("replay-dead", "--kind", "publish", "--by", "ops", "--note", "n",
              "--stop-after-failures", "2", code=2).stderr  # fmt: skip
    assert "stop_after_failures needs batch_size" in err
    assert cli.json("replay-runs") == []

    worker = Worker(
        app,
        WorkerOptions(
            queues=["default"], poll_interval=0.05, sweep_interval=0.1, install_signals=False
        ),
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        replayed = cli(
            "replay-dead", "--kind", "publish", "--by", "ops", "--note", "provider back?",
            "--batch-size", "2", "--stop-after-failures", "3", "--batch-timeout", "20",
        ).stdout  # fmt: skip
        # the run stopped at 3 deaths; the fourth replayed task runs (and dies) while the
        # worker does, so the evidence below sees all six dead
        deadline = time.monotonic() + 30
        while not all(app.get(i).state == "dead" for i in ids):
            assert time.monotonic() < deadline, [app.get(i).state for i in ids]
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(10)
    assert replayed.startswith("replayed 4 task(s):")
    # how far the run got and why it stopped, not only what it replayed
    last = replayed.strip().splitlines()[-1]
    assert last.startswith("run 1: ") and "of 4 replayed tasks died again" in last, last
    assert last.endswith("4 of the 6 selected replayed (jobtrail replay-runs --run 1)"), last

    table = cli("replay-runs").stdout.splitlines()
    assert table[0].split() == [
        "RUN", "STATE", "BY", "FILTER", "REPLAYED", "BATCHES", "DIED", "AGAIN", "STARTED",
        "DRIVER", "OUTCOME",
    ]  # fmt: skip
    row = table[1].split()
    assert row[:4] == ["1", "stopped", "ops", "kind=publish"] and row[4].startswith("until=")
    assert row[5] == "4/6"
    # the outcome counts the deaths when the run stopped (3 or more); DIED AGAIN counts them
    # now, and the fourth replayed task may have died after the stop
    stopped_at = re.search(r"(\d+) of 4 replayed tasks died again$", table[1])
    assert stopped_at is not None, table[1]
    assert 3 <= int(stopped_at.group(1)) <= int(row[7]) <= 4, table[1]
    [run] = cli.json("replay-runs")
    # the batches done (of their size) and who drove the run, as --json has them
    size = run["batch_size"]
    assert row[6] == (f"{run['batches']}x{size}" if size else str(run["batches"]))
    assert run["batches"] >= 1 and run["driver"] and f" {run['driver']} " in table[1]
    assert (run["state"], run["stop_code"], run["replayed"], run["total"]) == (
        "stopped",
        "died_again",
        4,
        6,
    )
    assert run["died_again"] >= 3 and run["note"] == "provider back?"
    assert "已停止" in cli("replay-runs", "--lang", "zh").stdout
    assert cli.json("replay-runs", "--run", "1") == [run]
    assert cli.json("replay-runs", "--run", "2") == []

    # dead: the evidence of the group and of its newest tasks (never the payload)
    dead = cli("dead", "--tasks", "2").stdout.splitlines()
    cols = dead[1].split()
    assert cols[:3] == ["attempts_exhausted", "publish", "6"]
    assert cols[4:7] == ["v7", "unavailable", "1"]
    assert dead[2] == "attempts_exhausted / publish:" and len(dead) == 5
    assert dead[3].split()[:6] == ["task", dead[3].split()[1], "unavailable", "attempts", "1/1",
                                   "version"]  # fmt: skip
    assert "input key:post-" in dead[3] and "providers img-" in dead[3]
    assert "payload" not in "".join(dead)
    [group] = cli.json("dead", "--tasks", "6")
    assert group["count"] == 6 and len(group["tasks"]) == 6
    by_id = {t["id"]: t for t in group["tasks"]}
    assert by_id[ids[0]]["input_ref"] == "key:post-0"
    assert by_id[ids[0]]["provider_ids"] == [f"img-{ids[0]}/upload"]
    assert by_id[ids[0]]["version"] == "v7"
    app.close()
