"""``jobtrail serve`` under hostile clients, through real servers and sockets:
DNS rebinding (the ``Host`` check), the failed-token throttle keyed on the peer, and the read
deadline and connection cap (an idle or trickling socket is closed; past the cap a new
connection is closed at once; each condition logged once a minute)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_process import SRC, Serve, free_port, wait_until

EVIL = "rebind.evil.example"


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[Serve]:
    """No tokens: the loopback mode, where every request is allowed."""
    s = Serve(tmp_path, f"sqlite:///{tmp_path}/open.db", tokens=None)
    try:
        yield s
    finally:
        s.stop()


def test_without_tokens_only_loopback_host_names_are_answered(open_server: Serve) -> None:
    base, port = open_server.base, open_server.port
    # what a page on a rebinding domain sends once its name points at 127.0.0.1: before, 201
    # (enqueued), 200 (every task read) and 303 (queue paused)
    page = {"Host": f"{EVIL}:{port}", "Origin": f"http://{EVIL}:{port}"}
    enqueue = httpx.post(base + "/api/tasks", json={"kind": "send"}, headers=page)
    assert enqueue.status_code == 400, enqueue.text
    assert "DNS rebinding" in enqueue.json()["error"]
    assert httpx.get(base + "/api/tasks", headers=page).status_code == 400
    form = {"by": "x", "note": "y"}
    pause = httpx.post(base + "/queues/default/pause", data=form, headers=page)
    assert pause.status_code == 400
    assert httpx.get(base + "/", headers={"Host": EVIL}).status_code == 400
    # the loopback names, any port, are answered
    for host in ("127.0.0.1", f"127.0.0.1:{port}", f"localhost:{port}", "[::1]", f"[::1]:{port}"):
        assert httpx.get(base + "/api/tasks", headers={"Host": host}).status_code == 200, host
    made = httpx.post(base + "/api/tasks", json={"kind": "send"})
    assert made.status_code == 201, made.text
    tasks = httpx.get(base + "/api/tasks").json()["tasks"]
    assert [t["kind"] for t in tasks] == ["send"]


def test_an_allowed_hosts_setting_names_the_hosts(tmp_path: Path) -> None:
    for args, env in (
        (("--allowed-host", "jobs.internal", "--allowed-host", "127.0.0.1"), {}),
        ((), {"JOBTRAIL_ALLOWED_HOSTS": "jobs.internal,127.0.0.1"}),
    ):
        s = Serve(tmp_path, f"sqlite:///{tmp_path}/hosts.db", *args, tokens=None, env=env)
        try:
            for host, code in (("jobs.internal", 200), ("JOBS.internal:8080", 200), (EVIL, 400)):
                got = httpx.get(s.base + "/api/tasks", headers={"Host": host}).status_code
                assert got == code, (args, env, host)
            loopback = httpx.get(s.base + "/api/tasks", headers={"Host": "localhost"})
            assert loopback.status_code == 400  # the list replaces the loopback default
        finally:
            s.stop()


def test_jobtrail_dashboard_checks_the_host_too(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/dash.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["PYTHONPATH"] = SRC
    subprocess.run(
        [sys.executable, "-m", "jobtrail", "migrate", "--db", db], env=env, check=True, timeout=60
    )
    port = free_port()
    log = (tmp_path / "dash.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobtrail", "dashboard", "--db", db, "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return httpx.get(base + "/", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 30, "the dashboard")
        assert httpx.get(base + "/", headers={"Host": f"{EVIL}:{port}"}).status_code == 400
        page = {"Host": f"{EVIL}:{port}", "Origin": f"http://{EVIL}:{port}"}
        form = {"by": "x", "note": "y"}
        paused = httpx.post(base + "/queues/default/pause", data=form, headers=page)
        assert paused.status_code == 400
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_token_throttle_is_keyed_on_the_peer_unless_a_proxy_is_declared(
    tmp_path: Path,
) -> None:
    s = Serve(tmp_path, f"sqlite:///{tmp_path}/throttle.db")
    try:
        codes = [
            httpx.get(
                s.base + "/api/tasks",
                headers={"Authorization": f"Bearer guess-{i}", "X-Forwarded-For": f"10.0.0.{i}"},
            ).status_code
            for i in range(30)
        ]
        # before: every guess came from a "new" address, 30 x 401
        assert codes.count(401) <= 10 and codes.count(429) >= 20, codes
    finally:
        s.stop()
    proxied = Serve(
        tmp_path, f"sqlite:///{tmp_path}/throttle.db", "--forwarded-allow-ips", "127.0.0.1"
    )
    try:
        codes = [
            httpx.get(
                proxied.base + "/api/tasks",
                headers={"Authorization": f"Bearer guess-{i}", "X-Forwarded-For": f"10.0.0.{i}"},
            ).status_code
            for i in range(30)
        ]
        assert codes == [401] * 30  # a declared proxy names its clients: each has a budget
    finally:
        proxied.stop()


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing ``sock`` within ``seconds`` (``None``: still open)."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return got


def test_idle_and_trickling_sockets_are_closed_and_connections_capped(tmp_path: Path) -> None:
    s = Serve(
        tmp_path,
        f"sqlite:///{tmp_path}/sockets.db",
        "--read-timeout",
        "1",
        "--max-connections",
        "8",
    )
    addr = ("127.0.0.1", s.port)
    try:
        # a socket that sends nothing: before, it stayed open for ever
        idle = socket.create_connection(addr)
        started = time.monotonic()
        answer = _closed_within(idle, 5)
        assert answer is not None and answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started < 4
        # headers a byte at a time, and a body a byte at a time
        for head in (b"GET /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n", None):
            slow = socket.create_connection(addr)
            if head is None:
                slow.sendall(
                    b"POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer adm\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                )
                head = b'{"kind": "send", "payload": "' + b"x" * 60
            started = time.monotonic()
            closed = False
            for byte in head:
                try:
                    slow.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                if _closed_within(slow, 0.2) is not None:
                    closed = True
                    break
                assert time.monotonic() - started < 5, "a trickling request was never cut"
            assert closed
            slow.close()
        # the cap: 8 open connections, the next is closed at once, 40 times over
        held = [socket.create_connection(addr) for _ in range(8)]
        time.sleep(0.2)  # all accepted
        for _ in range(40):
            extra = socket.create_connection(addr)
            assert _closed_within(extra, 0.5) == b""
            extra.close()
        for sock in held:
            sock.close()
        wait_until(
            lambda: httpx.get(s.base + "/openapi.json", timeout=2).status_code == 200,
            10,
            "the server to answer again",
        )
        log = s.log.read_text()
        assert log.count("connection cap reached") == 1, log
        assert log.count("sent no complete request") == 1, log
    finally:
        s.stop()
