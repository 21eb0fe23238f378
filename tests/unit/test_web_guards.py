"""The pure parts of the hostile-client guards: how a ``Host`` header is read, which
names are answered, the once-a-minute log, and text made into one log line."""

from __future__ import annotations

import logging

import pytest

from jobtrail.model.oneline import indented, one_line
from jobtrail.web.connections import OncePerMinute
from jobtrail.web.hosts import LOOPBACK_HOSTS, allowed_hosts, host_name


@pytest.mark.parametrize(
    "header,name",
    [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("LocalHost.", "localhost"),
        ("[::1]:80", "::1"),
        ("[::1]", "::1"),
        ("jobs.example", "jobs.example"),
        ("::1", None),  # IPv6 without brackets is no Host header
        ("[::1]x", None),
        ("a:b", None),
        ("", None),
        (None, None),
    ],
)
def test_host_name(header: str | None, name: str | None) -> None:
    assert host_name(header) == name


def test_allowed_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBTRAIL_ALLOWED_HOSTS", raising=False)
    assert allowed_hosts(None, has_tokens=False) == frozenset(LOOPBACK_HOSTS)
    assert allowed_hosts(None, has_tokens=True) is None
    assert allowed_hosts(["Jobs.Example", "[::1]"], has_tokens=True) == {"jobs.example", "::1"}
    assert allowed_hosts("*", has_tokens=False) is None
    monkeypatch.setenv("JOBTRAIL_ALLOWED_HOSTS", "a.example, b.example")
    assert allowed_hosts(None, has_tokens=False) == {"a.example", "b.example"}
    with pytest.raises(ValueError, match="not a host name"):
        allowed_hosts(["bad:name"], has_tokens=False)


def test_once_per_minute(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    said = OncePerMinute(logging.getLogger("jobtrail.test"), clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "jobtrail.test"):
        assert said.warn("cap", "cap reached")
        for _ in range(1000):
            assert not said.warn("cap", "cap reached")
        assert said.warn("other", "something else")
        now[0] = 60.0
        assert said.warn("cap", "cap reached")
    assert [r.getMessage() for r in caplog.records] == [
        "cap reached",
        "something else",
        "cap reached (1000 more times in the last 60 s)",
    ]


def test_one_line_and_indented() -> None:
    assert one_line("a\nb\r\tc\x1b[2J\u2028\u202e") == "a\\x0ab\\x0d\\x09c\\x1b[2J\\u2028\\u202e"
    block = "Traceback (most recent call last):\nValueError: x\n2026-01-01 forged"
    assert indented(block).splitlines() == [
        "    Traceback (most recent call last):",
        "    ValueError: x",
        "    2026-01-01 forged",
    ]
