"""``jobtrail rate`` and ``jobtrail resume --ramp``, run as subprocesses against a
fresh SQLite file: set, show, lift, audit; bad values exit 2 with one error line and write
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_ops import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    c("migrate")
    return c


def test_rate_set_shown_lifted_and_audited(cli: Cli) -> None:
    out = cli(
        "rate", "emails", "--per-second", "10", "--burst", "5", "--by", "ops", "--note", "quota"
    ).stdout
    assert out.strip() == "queue emails: running; at most 10/s, burst 5"
    listed = {q["queue"]: q for q in cli.json("queues")}
    assert (listed["emails"]["rate_per_second"], listed["emails"]["rate_burst"]) == (10, 5)
    result = cli.json(
        "rate", "emails", "--per-tenant", "2", "--ramp", "30s", "--by", "ops", "--note", "ramp"
    )
    assert result["rate_per_second"] is None and result["rate_per_tenant"] == 2
    assert result["ramp_seconds"] == 30
    out = cli("rate", "emails", "--by", "ops", "--note", "lifted").stdout
    assert out.strip() == "queue emails: running; no limits"
    history = cli.json("queues", "--history", "emails")
    assert [(h["action"], h["note"]) for h in history] == [
        ("rate", "lifted"),
        ("rate", "ramp"),
        ("rate", "quota"),
    ]
    assert history[1]["data"] == {"per_second": None, "burst": None, "per_tenant": 2, "ramp": 30}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--per-second", "-1"], "per_second must be between"),
        (["--per-second", "nan"], "per_second must be between"),
        (["--per-second", "1e300"], "per_second must be between"),
        (["--per-second", "ten"], "--per-second takes a number"),
        (["--per-second", "5", "--burst", "-2"], "--burst must not be negative"),
        (["--per-second", "5", "--ramp", "-3s"], "--ramp"),
        (["--burst", "3"], "burst and ramp need a rate"),
    ],
)
def test_bad_rates_exit_2_and_write_nothing(cli: Cli, args: list[str], message: str) -> None:
    err = cli("rate", "emails", *args, "--by", "ops", "--note", "n", code=2).stderr
    assert message in err
    assert cli.json("queues", "--history", "emails") == []


def test_resume_with_a_ramp(cli: Cli) -> None:
    cli("pause", "emails", "--by", "ops", "--note", "provider down")
    out = cli("resume", "emails", "--ramp", "1m", "--by", "ops", "--note", "back").stdout
    assert out.startswith("queue emails: running; at most 1/s, ramp of 60s from ")
    assert "rate ends at" in out
    history = cli.json("queues", "--history", "emails")
    assert history[0]["action"] == "resume" and history[0]["data"]["ramp"] == 60


def test_kind_rate_set_shown_and_audited(cli: Cli) -> None:
    out = cli(
        "rate", "emails", "--kind", "news", "--per-second", "5", "--by", "ops", "--note", "bulk"
    ).stdout
    assert out.strip() == "queue emails: running; kind news at most 5/s"
    listed = {q["queue"]: q for q in cli.json("queues")}
    assert listed["emails"]["kind_rates"] == [{"kind": "news", "per_second": 5, "burst": None}]
    history = cli.json("queues", "--history", "emails")
    assert history[0]["data"] == {"kind": "news", "per_second": 5, "burst": None}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "news", "--per-second", "-1"], "per_second must be between"),
        (["--kind", "news", "--per-second", "5", "--per-tenant", "1"], "per_tenant and ramp"),
        (["--kind", "", "--per-second", "5"], "kind must be a non-empty"),
        (["--kind", "news", "--burst", "3"], "burst needs a rate"),
    ],
)
def test_bad_kind_rates_exit_2_and_write_nothing(cli: Cli, args: list[str], message: str) -> None:
    err = cli("rate", "emails", *args, "--by", "ops", "--note", "n", code=2).stderr
    assert message in err
    assert cli.json("queues", "--history", "emails") == []
