"""Bad input to the controls of enqueue (debounce, uniqueness windows, expiry): a clear error
naming the argument and nothing written, on both backends, from Python, over HTTP (4xx) and
from the CLI (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import jobtrail

from ._http_support import auth, client, register

SRC = Path(__file__).resolve().parents[2] / "src"
NAN = float("nan")
HUGE = 1e12
PAST = datetime(2020, 1, 1, tzinfo=UTC)

#: (keyword arguments of enqueue, what the error must say)
CASES: list[tuple[dict[str, Any], str]] = [
    ({"debounce_key": 7, "debounce": 1}, "debounce_key must be a string"),
    ({"debounce_key": "", "debounce": 1}, "debounce_key must be a non-empty string"),
    ({"debounce_key": "k" * 256, "debounce": 1}, "debounce_key must be a non-empty string"),
    ({"debounce_key": "a\x00b", "debounce": 1}, "debounce_key contains a NUL"),
    ({"debounce_key": "k", "debounce": "5"}, "debounce must be a number"),
    ({"debounce_key": "k", "debounce": True}, "debounce must be a number"),
    ({"debounce_key": "k", "debounce": -1}, "debounce must be a number of seconds"),
    ({"debounce_key": "k", "debounce": NAN}, "debounce must be a number of seconds"),
    ({"debounce_key": "k", "debounce": HUGE}, "debounce must be a number of seconds"),
    ({"debounce_key": "k", "debounce": 5, "debounce_max": 4}, "debounce_max (4s) must be at"),
    ({"debounce_key": "k", "debounce": 5, "debounce_max": NAN}, "debounce_max must be"),
    ({"debounce": 5}, "debounce needs a debounce_key"),
    ({"debounce_max": 5}, "debounce_max needs a debounce_key"),
    ({"debounce_key": "k"}, "debounce_key needs debounce"),
    ({"debounce_key": "k", "debounce": 1, "delay": 5}, "give delay or debounce"),
    ({"debounce_key": "k", "debounce": 1, "idempotency_key": "i"}, "debounce_key or idem"),
    ({"unique_for": 5}, "unique_for needs an idempotency_key"),
    ({"unique_while": "active"}, "unique_while needs an idempotency_key"),
    ({"idempotency_key": "i", "unique_for": 5, "unique_while": "active"}, "unique_for or uni"),
    ({"idempotency_key": "i", "unique_for": 0}, "unique_for must be a number of seconds"),
    ({"idempotency_key": "i", "unique_for": -5}, "unique_for must be a number of seconds"),
    ({"idempotency_key": "i", "unique_for": NAN}, "unique_for must be a number of seconds"),
    ({"idempotency_key": "i", "unique_for": HUGE}, "unique_for must be a number of seconds"),
    ({"idempotency_key": "i", "unique_for": [1]}, "unique_for must be a number"),
    ({"idempotency_key": "i", "unique_while": "done"}, "unique_while must be 'active'"),
    ({"idempotency_key": "i", "unique_while": 1}, "unique_while must be 'active'"),
    ({"expires_in": 0}, "expires_in must be a number of seconds"),
    ({"expires_in": -1}, "expires_in must be a number of seconds"),
    ({"expires_in": NAN}, "expires_in must be a number of seconds"),
    ({"expires_in": HUGE}, "expires_in must be a number of seconds"),
    ({"expires_in": "1h"}, "expires_in must be a number"),
    ({"expires_in": 5, "expires_at": "2099-01-01T00:00:00Z"}, "expires_in or expires_at"),
    ({"expires_at": datetime(2099, 1, 1)}, "expires_at must be timezone-aware"),
    ({"expires_at": "2099-01-01T00:00:00"}, "expires_at needs a time zone"),
    ({"expires_at": PAST}, "expires_at is in the past"),
    ({"expires_at": "2020-01-01T00:00:00Z"}, "expires_at is in the past"),
    ({"expires_at": "soon"}, "expires_at is not an ISO 8601 time"),
    ({"expires_at": 5}, "expires_at must be a datetime"),
]


def _nothing_written(app: jobtrail.App) -> None:
    assert app.list() == []


@pytest.mark.parametrize(("kwargs", "message"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_controls_are_refused_naming_the_argument(
    app: jobtrail.App, kwargs: dict[str, Any], message: str
) -> None:
    app.task("k")(lambda ctx, p: None)
    with pytest.raises((ValueError, TypeError)) as info:
        app.enqueue("k", {"n": 1}, **kwargs)
    assert message in str(info.value)
    with pytest.raises((ValueError, TypeError)):
        app.enqueue_many([{"kind": "k", "payload": 1}, {"kind": "k", **kwargs}])
    _nothing_written(app)


def test_a_debounce_close_to_expiry_is_still_checked_per_enqueue(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    first = app.enqueue("k", 1, debounce_key="d", debounce=5)
    with pytest.raises(ValueError, match="debounce_max"):
        app.enqueue("k", 2, debounce_key="d", debounce=5, debounce_max=1)
    assert app.get(first.id).payload == 1
    assert [t.reason for t in app.transitions(first.id)] == ["enqueued"]


#: (JSON body fields, what the 422 must say): the HTTP form of a few of the cases
HTTP_CASES: list[tuple[dict[str, Any], str]] = [
    ({"debounce_key": "k", "debounce": -1}, "debounce must be"),
    ({"debounce_key": "k", "debounce": "5"}, "debounce"),
    ({"debounce_key": "", "debounce": 1}, "debounce_key"),
    ({"debounce": 5}, "debounce needs a debounce_key"),
    ({"debounce_key": "k", "debounce": 5, "debounce_max": 4}, "debounce_max"),
    ({"unique_for": 5}, "unique_for needs an idempotency_key"),
    ({"expires_in": 5, "expires_at": "2099-01-01T00:00:00Z"}, "expires_in or expires_at"),
    ({"expires_at": "2099-01-01T00:00:00"}, "expires_at needs a time zone"),
    ({"expires_at": "2020-01-01T00:00:00Z"}, "expires_at is in the past"),
    ({"expires_in": 1e12}, "expires_in"),
    ({"unique_while": "done"}, "unique_while"),
]


def test_bad_controls_over_http_are_422(app: jobtrail.App) -> None:
    register(app)
    http = client(app)
    for fields, message in HTTP_CASES:
        r = http.post("/api/tasks", json={"kind": "send", **fields}, headers=auth("adm"))
        assert r.status_code == 422, (fields, r.status_code, r.text)
        assert message in r.text, (fields, r.text)
    r = http.post(
        "/api/tasks",
        json={"kind": "send", "unique_for": 5, "unique_while": "active"},
        headers={**auth("adm"), "Idempotency-Key": "i"},
    )
    assert r.status_code == 422 and "unique_for or unique_while" in r.text
    _nothing_written(app)


def test_controls_over_http(app: jobtrail.App) -> None:
    register(app)
    http = client(app)
    body = {"kind": "send", "payload": 1, "debounce_key": "d", "debounce": 30}
    first = http.post("/api/tasks", json=body, headers=auth("adm"))
    assert first.status_code == 201 and first.json()["debounced"] is False
    again = http.post("/api/tasks", json={**body, "payload": 2}, headers=auth("adm"))
    assert again.status_code == 200, again.text
    assert again.json()["debounced"] is True and again.json()["id"] == first.json()["id"]
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    exp = http.post("/api/tasks", json={"kind": "send", "expires_at": soon}, headers=auth("adm"))
    assert exp.status_code == 201 and exp.json()["expires_at"] is not None


APP_MODULE = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("send")
    def send(ctx, payload):
        return None
""")

CLI_CASES: list[tuple[tuple[str, ...], str]] = [
    (("--debounce-key", "k", "--debounce", "-5"), "--debounce"),
    (("--debounce-key", "k", "--debounce", "99999999999d"), "--debounce"),
    (("--debounce", "5"), "debounce needs a debounce_key"),
    (("--debounce-key", "k", "--debounce", "5", "--debounce-max", "4"), "debounce_max"),
    (("--unique-for", "5"), "unique_for needs an idempotency_key"),
    (("--key", "i", "--unique-for", "5", "--unique-while", "active"), "unique_for or"),
    (("--key", "i", "--unique-while", "done"), "unique_while must be 'active'"),
    (("--expires-in", "5", "--expires-at", "2099-01-01T00:00:00Z"), "expires_in or"),
    (("--expires-at", "2099-01-01T00:00:00"), "expires_at needs a time zone"),
    (("--expires-at", "2020-01-01T00:00:00Z"), "expires_at is in the past"),
    (("--expires-in", "nan"), "--expires-in"),
]


def test_bad_controls_in_the_cli_are_exit_2(store: Any, tmp_path: Path) -> None:
    (tmp_path / "ctlapp.py").write_text(APP_MODULE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env.update(PYTHONPATH=str(SRC), JOBTRAIL_DATABASE_URL=store.url, **store.env())

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jobtrail", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert cli("migrate").returncode == 0
    for args, message in CLI_CASES:
        proc = cli("enqueue", "send", "--app", "ctlapp:app", *args)
        assert proc.returncode == 2, (args, proc.returncode, proc.stdout, proc.stderr)
        # one line, the error (beside the WARNING of an App that found a pooler by itself)
        said = [line for line in proc.stderr.splitlines() if " through a pooler " not in line]
        assert len(said) == 1 and message in said[0], (args, proc.stderr)
    listed = cli("list", "--json")
    assert listed.returncode == 0 and listed.stdout.strip() == "[]", listed.stdout
    ok = cli("enqueue", "send", "--app", "ctlapp:app", "--debounce-key", "k", "--debounce", "30s")
    assert ok.returncode == 0, ok.stderr
    again = cli("enqueue", "send", "--app", "ctlapp:app", "--debounce-key", "k", "--debounce", "30")
    assert again.returncode == 0 and "debounced" in again.stdout, again.stdout
