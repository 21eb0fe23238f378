"""``--lang zh`` (and ``JOBTRAIL_LANG=zh``) through the real ``jobtrail`` CLI (issue 17 item
6): the headers and labels of ``list``, ``status``, ``stats``, ``queues``, ``dead``, ``cron
list`` and ``explain`` in Chinese, the columns still aligned, ``--json`` unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_ops import Cli, make_work

from jobtrail.model import i18n

VERBS = [
    ("list",),
    ("stats",),
    ("queues",),
    ("queues", "--history", "default"),
    ("dead",),
    ("dead-preview",),
    ("replay-runs",),
    ("cron", "list"),
]


def shape(doc: Any) -> Any:
    """A JSON document without what changes with the clock (ages, rates, ``at``, a
    preview's ``until``)."""
    if isinstance(doc, dict):
        # ``explain --json`` carries the explanation in the asked language (as before)
        return {k: k if k in ("at", "until", "explanation") else shape(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [shape(v) for v in doc]
    return "number" if isinstance(doc, float) else doc


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_every_human_output_follows_lang_and_json_does_not(cli: Cli) -> None:
    cli("migrate")
    done, dead, waiting = make_work(cli.url)
    cli("pause", "default", "--by", "值班", "--note", "排查")
    cli("limit", "default", "--total", "2", "--by", "值班", "--note", "限流")

    out = cli("list", "--lang", "zh").stdout
    header = out.splitlines()[0]
    for key in ("cli.h_id", "cli.h_kind", "cli.h_state", "cli.h_attempts", "cli.h_updated"):
        assert i18n.t(key, "zh") in header
    assert "KIND" not in header and "boom" in out and "dead" in out  # codes stay codes
    # the columns line up on a terminal (a CJK character takes two columns)
    rows = out.splitlines()
    kind_col = i18n.display_width(header[: header.index("类型")])
    assert all(
        i18n.display_width(r[: r.index("echo" if "echo" in r else "boom")]) == kind_col
        for r in rows[1:]
    )

    status = cli("status", dead, "--lang", "zh").stdout
    assert status.startswith(f"任务 {dead}  boom")
    for label in ("状态", "队列", "尝试", "最近错误", "创建于", "结束于"):
        assert f"  {label}" in status
    assert "invalid_input" in status

    stats = cli("stats", "--lang", "zh").stdout
    assert stats.startswith("队列健康状况，截至") and "最久到期" in stats and "清空用时" in stats

    queues = cli("queues", "--lang", "zh").stdout
    assert queues.startswith("队列 default：已暂停，操作人 值班") and "最多 2 个执行中" in queues
    history = cli("queues", "--history", "default", "--lang", "zh").stdout
    assert history.splitlines()[0].split() == ["时间", "操作", "操作人", "备注", "数据"]
    assert "没有变更记录" in cli("queues", "--history", "nope", "--lang", "zh").stdout

    dead_out = cli("dead", "--lang", "zh").stdout
    assert dead_out.splitlines()[0].split() == [
        "原因", "类型", "数量", "最早", "版本", "错误分类", "尝试", "首次失败", "末次失败",
        "最后的错误",
    ]  # fmt: skip
    assert dead_out.splitlines()[3].split()[:2] == ["任务", dead]
    assert "permanent_error" in dead_out

    assert cli("cron", "list", "--lang", "zh").stdout.startswith("没有定时计划")

    explained = cli("explain", dead, "--lang", "zh").stdout
    assert "permanent_error" in explained and "需人工处理" in explained

    # English stays as it was
    assert cli("list").stdout.splitlines()[0].split()[:3] == ["ID", "KIND", "QUEUE"]
    assert cli("status", dead).stdout.startswith(f"task {dead}  boom\n  state ")

    # JOBTRAIL_LANG sets the default; --lang wins over it
    cli.env["JOBTRAIL_LANG"] = "zh"
    # ages move on (and may widen a column): compare the words of the header
    assert cli("dead").stdout.splitlines()[0].split() == dead_out.splitlines()[0].split()
    assert cli("status", dead, "--lang", "en").stdout.startswith(f"task {dead}")
    # --json is the same document in every language (keys are never translated)
    for args in [*VERBS, ("status", dead), ("explain", dead)]:
        zh = json.loads(cli(*args, "--json").stdout)
        en = json.loads(cli(*args, "--json", "--lang", "en").stdout)
        assert shape(zh) == shape(en), args
    # a language we do not have is bad input (exit 2)
    assert "'fr'" in cli("list", "--lang", "fr", code=2).stderr
    cli.env["JOBTRAIL_LANG"] = "fr"
    cli("list", code=2)
