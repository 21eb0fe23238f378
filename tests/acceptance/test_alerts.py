"""The shipped alerting rules and Grafana dashboard (deploy/) against the real ``jobtrail serve``:
``promtool check rules`` and ``promtool test rules`` pass, ``promtool check metrics`` accepts a
live ``/metrics`` body in which every family has samples, and every metric the rules and the
dashboard name is one that ``/metrics`` serves. promtool is Debian's ``prometheus`` package
(``.ci/run`` installs it); without it these tests skip, and under ``CI=true`` they fail."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import unavailable
from test_http import ADM, Server

import jobtrail
from jobtrail.web import metrics as metrics_module

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "jobtrail.json"
ALERT_DOCS = ROOT / "docs" / "alerts.md"
NAME = re.compile(r"jobtrail_[a-z_]+")


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        unavailable("promtool is not installed (Debian package prometheus)")
    return path


def run(*args: str, stdin: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=60
    )


def rule_blocks() -> dict[str, str]:
    """alert name → its block of alerts.yml."""
    text = RULES.read_text(encoding="utf-8")
    parts = re.split(r"^\s*- alert: ", text, flags=re.M)[1:]
    return {p.split("\n", 1)[0].strip(): p for p in parts}


def dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_promtool_check_rules() -> None:
    got = run("check", "rules", str(RULES.relative_to(ROOT)))
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"SUCCESS: {len(rule_blocks())} rules found" in got.stdout


def test_promtool_test_rules() -> None:
    got = run("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "SUCCESS" in got.stdout


def test_each_alert_has_for_severity_annotations_and_a_documented_runbook() -> None:
    blocks = rule_blocks()
    assert {
        "JobtrailStoreDown",
        "JobtrailOldestDueAgeHigh",
        "JobtrailDeadArrivals",
        "JobtrailLeaseExpiries",
        "JobtrailArrivalsAboveCompletions",
        "JobtrailReceiptTimeouts",
    } <= set(blocks)
    docs = ALERT_DOCS.read_text(encoding="utf-8")
    headings = {h.strip().lower() for h in re.findall(r"^### (.+)$", docs, flags=re.M)}
    for name, block in blocks.items():
        for field in ("for:", "severity:", "summary:", "description:", "runbook:"):
            assert re.search(rf"^\s+{field}", block, flags=re.M), f"{name} has no {field}"
        runbook = re.search(r'runbook: "docs/alerts\.md#([a-z]+)"', block)
        assert runbook and runbook.group(1) == name.lower(), name
        assert name.lower() in headings, f"docs/alerts.md has no '### {name}'"


def test_dashboard_is_importable_json_with_a_datasource_input() -> None:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"]
    titles = " / ".join(p["title"] for p in board["panels"]).lower()
    for what in ("backlog", "oldest due", "arrivals", "run time", "queue wait", "dead", "lease"):
        assert what in titles, what
    assert "store up" in titles
    for p in board["panels"]:
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert p["targets"], p["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_queries_parse(tmp_path: Path) -> None:
    """Each dashboard query, with Grafana's variables filled in, is valid PromQL: promtool
    checks it as a recording rule."""
    lines = ["groups:", "  - name: grafana", "    rules:"]
    for i, expr in enumerate(dashboard_exprs()):
        if expr.startswith("label_values("):
            continue
        promql = expr.replace("$__rate_interval", "5m").replace("$queue", ".*")
        lines += [f"      - record: grafana_panel_{i}", f"        expr: {json.dumps(promql)}"]
    path = tmp_path / "grafana_rules.yml"
    path.write_text("\n".join(lines) + "\n")
    got = run("check", "rules", str(path))
    assert got.returncode == 0, got.stdout + got.stderr


@pytest.fixture
def served(store: Any, tmp_path: Path) -> Iterator[str]:
    """The body of a live ``/metrics`` after some work, with every family sampled: tasks that
    succeeded, died and still wait, a refused webhook, and the counters' deferred first scrape."""
    server = Server(tmp_path, store.url).wait()
    try:
        app: jobtrail.App = store.app()

        @app.task("send")
        def send(ctx: Any, payload: Any) -> Any:
            return payload

        @app.task("fail", max_attempts=1)
        def fail(ctx: Any, payload: Any) -> Any:
            raise jobtrail.PermanentError("no", category="invalid_input")

        with httpx.Client(base_url=server.base, timeout=10, headers=ADM) as http:
            assert http.get("/metrics").status_code == 200  # the counters start here
            for kind in ("send", "send", "send_email"):  # send_email: nobody runs it
                assert http.post("/api/tasks", json={"kind": kind}).status_code == 201
            app.enqueue("fail", {})
            app.run_worker(burst=True, concurrency=1, poll_interval=0.05)
            refused = http.post("/webhooks/pay", content=b"{}", headers={"webhook-id": "m"})
            assert refused.status_code in (400, 401)
            time.sleep(metrics_module.LAG + 0.5)  # past the late-commit lag
            http.get("/metrics")  # new label sets are exported at 0 first
            yield http.get("/metrics").text
    finally:
        server.stop()


def test_promtool_check_metrics_on_a_live_body(served: str) -> None:
    """(One server per backend for both checks: each waits out the counters' lag.)"""
    assert 'reason="completed",to_state="succeeded"} 2.0' in served
    assert 'jobtrail_attempt_duration_seconds_count{kind="send",queue="default"} 2.0' in served
    families = re.findall(r"^# TYPE (\S+) (\S+)$", served, flags=re.M)
    for name, _ in families:  # every family has at least one sample
        assert re.search(rf"^{name}(_bucket|_sum|_count)?[{{ ]", served, flags=re.M), name
    got = run("check", "metrics", stdin=served)
    said = (got.stdout + got.stderr).strip()
    assert (got.returncode, said) == (0, ""), said  # 3: lint findings, 1: a parse error
    for name in ("jobtrail_run_seconds", "jobtrail_queue_wait_seconds"):  # window quantiles
        assert f"# TYPE {name} summary" in served
        lines = re.findall(rf"^{name}{{(.*)}} \S+$", served, flags=re.M)
        assert any('kind="send"' in ls and 'quantile="0.95"' in ls for ls in lines), lines
    every_metric_the_rules_and_dashboard_use_is_served(served)


def every_metric_the_rules_and_dashboard_use_is_served(served: str) -> None:
    samples = set(re.findall(r"^(jobtrail_[a-z_]+)[{ ]", served, flags=re.M))
    histograms = {n for n, t in re.findall(r"^# TYPE (\S+) (\S+)$", served, flags=re.M)}
    histograms = {n for n in histograms if f"# TYPE {n} histogram" in served}
    rules = "\n".join(
        line
        for line in RULES.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("#")
    )
    used = set(NAME.findall(rules)) | set(NAME.findall("\n".join(dashboard_exprs())))
    assert {"jobtrail_transitions_total", "jobtrail_attempt_duration_seconds_bucket"} <= used
    missing = []
    for name in sorted(used):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in samples and not (base != name and base in histograms):
            missing.append(name)
    assert missing == [], f"named in deploy/ but not served by /metrics: {missing}"
