"""Request bodies are bounded while they are read, through a real ``jobtrail serve``.

A client streams a chunked body with no ``Content-Length`` to every route that takes a body —
the API, a dashboard form, ``/login`` and the webhook route — without any token: the server
must answer 413 as soon as the body passes the limit, before authentication, and its peak
resident memory must not grow with the size of the body it was sent.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_process import Serve

MiB = 1024 * 1024
MAX_REQUEST = 2 * MiB
WEBHOOK_MAX = 1 * MiB
CHUNK = 64 * 1024
ADM = {"Authorization": "Bearer adm"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path, f"sqlite:///{tmp_path}/limits.db")
    try:
        yield s
    finally:
        s.stop()


def _read_response(sock: socket.socket, timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            break
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines and lines[0].startswith("HTTP/1.1 "), data[:200]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    want = int(headers.get("content-length", "0"))
    while len(body) < want:
        part = sock.recv(65536)
        if not part:
            break
        body += part
    return int(lines[0].split()[1]), headers, body


def stream(
    port: int, path: str, total: int, content_type: str, first: bytes, extra: str = ""
) -> tuple[int, bytes, int]:
    """POST ``first`` then more of the same up to ``total`` as a chunked body without
    ``Content-Length``; stop sending as soon as the server answers. Returns the status, the
    response body and how many body bytes went out before the answer came."""
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n{extra}\r\n"
            ).encode()
        )
        sent = 0
        piece = first
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered (or closed): no need to send the rest
            try:
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        else:
            sock.sendall(b"0\r\n\r\n")
        status, _, body = _read_response(sock)
        return status, body, sent
    finally:
        sock.close()


def test_chunked_bodies_are_refused_while_read_and_memory_stays_flat(served: Serve) -> None:
    port = served.port
    # warm every route up with a small body first, so the baseline includes imports and caches
    with httpx.Client(base_url=served.base, timeout=10) as web:
        web.post("/api/tasks", json={"kind": "send"})
        task = web.post("/api/tasks", json={"kind": "send"}, headers=ADM).json()["id"]
        web.post("/login", data={"token": "nope"})
        web.post(f"/tasks/{task}/replay", data={"by": "x", "note": "y"}, headers=ADM)
        web.post("/webhooks/pay", content=b"{}")
    before = served.rss()
    form = "application/x-www-form-urlencoded"
    bearer = "Authorization: Bearer adm\r\n"  # the dashboard reads a form only once authorized
    cases = [  # the API and /login read their bodies before they look at the token
        ("/api/tasks", 64 * MiB, "application/json", b"x" * CHUNK, "", MAX_REQUEST),
        # many small fields: each under the form parser's own per-field limit
        ("/login", 32 * MiB, form, b"&t=" + b"x" * CHUNK, "", MAX_REQUEST),
        (f"/tasks/{task}/cancel", 32 * MiB, form, b"&b=" + b"x" * CHUNK, bearer, MAX_REQUEST),
        ("/webhooks/pay", 32 * MiB, "application/json", b"x" * CHUNK, "", WEBHOOK_MAX),
    ]
    answers = []
    started = time.monotonic()
    for path, total, content_type, first, extra, limit in cases:
        status, body, sent = stream(port, path, total, content_type, first, extra)
        answers.append((path, status, body, sent, limit))
    took = time.monotonic() - started
    after = served.rss()
    grew = after["VmHWM"] - before["VmHWM"]
    report = (
        f"peak RSS {before['VmHWM'] / MiB:.1f} MiB -> {after['VmHWM'] / MiB:.1f} MiB "
        f"(+{grew / MiB:.1f} MiB), RSS now {after['VmRSS'] / MiB:.1f} MiB, {took:.1f}s; "
        + "; ".join(f"{p}: {s} after {n / MiB:.1f} MiB sent" for p, s, _, n, _ in answers)
    )
    print(report)
    for path, status, body, sent, limit in answers:
        assert status == 413, report
        assert f"over the {limit}-byte limit".encode() in body, (path, body)
        # answered soon after the limit, not after the whole body arrived
        assert sent < limit + 16 * MiB, report
    assert grew < 30 * MiB, report
    assert served.proc.poll() is None


def test_a_declared_length_over_the_limit_is_refused_before_the_body(served: Serve) -> None:
    """A ``Content-Length`` over the limit is answered at once: the client need not send it."""
    for path, limit in (
        ("/api/tasks", MAX_REQUEST),
        ("/login", MAX_REQUEST),
        ("/webhooks/pay", WEBHOOK_MAX),
    ):
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(
                (
                    f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {limit + 1}\r\n\r\n"
                ).encode()
            )
            status, _, body = _read_response(sock, timeout=10)
        assert status == 413 and f"over the {limit}-byte limit".encode() in body, (path, body)


def test_bodies_within_the_limit_still_work(served: Serve) -> None:
    adm = ADM
    payload = "y" * (MiB // 2)

    def chunks() -> Iterator[bytes]:
        text = f'{{"kind": "send", "payload": "{payload}"}}'.encode()
        for i in range(0, len(text), CHUNK):
            yield text[i : i + CHUNK]

    with httpx.Client(base_url=served.base, timeout=30) as web:
        r = web.post(
            "/api/tasks", content=chunks(), headers={**adm, "Content-Type": "application/json"}
        )
        assert r.status_code == 201, r.text
        assert web.get(f"/api/tasks/{r.json()['id']}", headers=adm).json()["payload"] == payload
