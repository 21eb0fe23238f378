"""`jobtrail demo` runs from scratch and its output shows every outcome (issue: the demo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def run_demo(*args: str, tmp_path: Path) -> str:
    env = dict(os.environ, PYTHONPATH=SRC)
    done = subprocess.run(
        [sys.executable, "-m", "jobtrail", "demo", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def summary(out: str) -> dict[str, tuple[str, str]]:
    lines = out.split("\nsummary\n", 1)[1].splitlines()
    rows = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 5 and parts[1] == "task":
            rows[parts[0]] = (parts[3], parts[4].strip("()"))
    return rows


def test_demo_shows_every_outcome(tmp_path: Path) -> None:
    out = run_demo("--keep", str(tmp_path / "kept.db"), tmp_path=tmp_path)
    rows = summary(out)
    assert rows == {
        "crash_reentrant": ("succeeded", "receipt_confirmed"),
        "crash_not_reentrant": ("dead", "lease_expired_effect_uncertain"),
        "receipt_arrives": ("succeeded", "receipt_confirmed"),
        "timeout_recovers": ("succeeded", "receipt_confirmed"),
        "revoked_token": ("dead", "permanent_error"),
        "cancel_before_start": ("cancelled", "cancelled_before_start"),
        "cancel_mid_run": ("cancelled", "cancel_confirmed"),
        "cancel_too_late": ("succeeded", "receipt_confirmed"),
        "workflow": ("succeeded", "children_succeeded"),
    }
    # the narratives behind the summary
    for code in (
        "lease_expired",
        "retry_scheduled",
        "cancel_too_late",
        "submitted",
        "children_succeeded",
        "cancel_requested",
        "permanent_error",
    ):
        assert code in out
    assert "nothing was done twice" in out
    assert "invariant check (state == last transition): clean" in out
    assert (tmp_path / "kept.db").exists()
    # the kept database answers `jobtrail explain`
    env = dict(os.environ, PYTHONPATH=SRC)
    explained = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobtrail",
            "explain",
            "1",
            "--db",
            f"sqlite:///{tmp_path / 'kept.db'}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert explained.returncode == 0 and "lease_expired" in explained.stdout


@pytest.mark.parametrize("lang", ["zh"])
def test_demo_speaks_chinese(tmp_path: Path, lang: str) -> None:
    out = run_demo("--lang", lang, tmp_path=tmp_path)
    assert "迁移记录" in out and "回执确认成功" in out
    # the narration and the summary too, not only the explanations (issue 17 item 6)
    for line in (
        "jobtrail 演示 — 全新的 SQLite 存储，位于",
        "立即用 SIGKILL 杀死了 worker 进程",
        "重复点击：同一个幂等键返回了任务",
        "开始前取消：cancelled",
        "运行中取消：cancel_requested",
        "提交之后取消：cancel_requested",
        "取消已结束的任务：already_terminal",
        "没有任何操作做了两次",
        "不变式检查（状态 == 最后一次转换）：通过",
    ):
        assert line in out, line
    rows = out.split("\n汇总\n", 1)[1].splitlines()
    assert "  revoked_token          任务 " in out
    assert sum(1 for r in rows if len(r.split()) == 5 and r.split()[1] == "任务") == 9
    for english in ("summary\n", "killed worker", "double click", "cancel before start"):
        assert english not in out, english
