"""Hardening of the dashboard and the API, through a real ``jobtrail serve``: the
security headers on every kind of answer, ``/logout``, the throttle on failed sign-ins and
tokens, and when the session cookie is ``Secure``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_process import Serve, serving

ADM = {"Authorization": "Bearer adm"}
COOKIE = "jobtrail_token"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    yield from serving(tmp_path_factory, "hardening")


def own(s: Serve) -> dict[str, str]:
    return {"Origin": s.base, "Sec-Fetch-Site": "same-origin"}


def csp(response: httpx.Response) -> dict[str, str]:
    policy = response.headers.get("content-security-policy", "")
    return {
        part.split(" ", 1)[0]: part.split(" ", 1)[1] if " " in part else ""
        for part in (p.strip() for p in policy.split(";"))
        if part
    }


def test_html_pages_send_the_security_headers(served: Serve) -> None:
    task = httpx.post(served.base + "/api/tasks", json={"kind": "send"}, headers=ADM).json()["id"]
    pages = ["/", f"/tasks/{task}", "/queues", "/dead", "/cron", "/workers", "/login"]
    for path in pages:
        r = httpx.get(served.base + path, headers=ADM)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), path
        policy = csp(r)
        assert policy.get("default-src") == "'self'", (path, policy)
        assert policy.get("frame-ancestors") == "'none'", (path, policy)
        assert "unsafe-inline" not in r.headers["content-security-policy"], path
        assert "unsafe-eval" not in r.headers["content-security-policy"], path
        assert r.headers.get("x-frame-options") == "DENY", path
        assert r.headers.get("x-content-type-options") == "nosniff", path
        assert r.headers.get("referrer-policy") in ("same-origin", "no-referrer"), path
        if path != "/login":
            assert "no-store" in r.headers.get("cache-control", ""), path
        # and the page needs nothing the policy forbids: no inline script, style or handler
        html = r.text
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), path
        assert "<style" not in html and " style=" not in html, path
        assert not re.search(r"\son[a-z]+=", html) and "javascript:" not in html, path


def test_errors_api_and_static_answers_send_them_too(served: Serve) -> None:
    for path, headers, status in (
        ("/", {}, 401),
        ("/tasks/999999", ADM, 404),
        ("/api/tasks", ADM, 200),
        ("/api/tasks", {}, 401),
        ("/api/tasks/999999", ADM, 404),
        ("/openapi.json", {}, 200),
        ("/metrics", ADM, 200),
        ("/static/htmx.min.js", {}, 200),
        ("/static/dashboard.css", {}, 200),
    ):
        r = httpx.get(served.base + path, headers=headers)
        assert r.status_code == status, (path, r.status_code)
        assert r.headers.get("x-content-type-options") == "nosniff", path
        assert r.headers.get("x-frame-options") == "DENY", path
        if not path.startswith("/static/"):
            assert "no-store" in r.headers.get("cache-control", ""), path
    css = httpx.get(served.base + "/static/dashboard.css")
    assert css.headers["content-type"].startswith("text/css")


def test_logout_clears_the_cookie(served: Serve) -> None:
    with httpx.Client(base_url=served.base, follow_redirects=False) as web:
        r = web.post("/login", data={"token": "adm"}, headers=own(served))
        assert r.status_code == 303 and web.cookies.get(COOKIE) == "adm"
        page = web.get("/").text
        assert 'action="/logout"' in page and 'id="sign-out"' in page
        # another site cannot sign the person out either
        evil = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
        assert web.post("/logout", headers=evil).status_code == 403
        assert web.cookies.get(COOKIE) == "adm"
        r = web.post("/logout", headers=own(served))
        assert r.status_code == 303 and r.headers["location"] == "/login"
        cleared = r.headers["set-cookie"]
        assert cleared.startswith(f'{COOKIE}=""') or cleared.startswith(f"{COOKIE}=;")
        assert "max-age=0" in cleared.lower()
        assert web.cookies.get(COOKIE) is None
        assert web.get("/").status_code == 401
    # a page read with a bearer header offers no sign-out: there is no session to end
    assert 'id="sign-out"' not in httpx.get(served.base + "/", headers=ADM).text


def test_a_stale_cookie_is_dropped_rather_than_counted_again(served: Serve) -> None:
    r = httpx.get(served.base + "/", headers={"Cookie": f"{COOKIE}=rotated-away"})
    assert r.status_code == 401
    assert "max-age=0" in r.headers.get("set-cookie", "").lower()


def _throttled_server(tmp: Path) -> Serve:
    return Serve(tmp, f"sqlite:///{tmp}/throttle.db")


def test_300_wrong_logins_are_slowed_to_a_trickle(tmp_path: Path) -> None:
    served = _throttled_server(tmp_path)
    try:
        counts: dict[int, int] = {}
        retry_after: set[str] = set()
        started = time.monotonic()
        with httpx.Client(base_url=served.base, follow_redirects=False) as web:
            for i in range(300):
                r = web.post("/login", data={"token": f"guess-{i}"}, headers=own(served))
                counts[r.status_code] = counts.get(r.status_code, 0) + 1
                if r.status_code == 429:
                    retry_after.add(r.headers["retry-after"])
            took = time.monotonic() - started
            print(f"300 wrong logins in {took:.2f}s: {counts}, Retry-After {sorted(retry_after)}")
            assert set(counts) == {401, 429}, counts
            assert counts[401] <= 10, counts  # only these were checked against the tokens
            assert all(v.isdigit() and 0 < int(v) <= 60 for v in retry_after), retry_after
            # while throttled even the right token is not looked at from this address
            assert web.post("/login", data={"token": "adm"}, headers=own(served)).status_code == 429
            # guessing through the API instead is throttled the same way
            assert web.get("/api/tasks", headers={"Authorization": "Bearer x"}).status_code == 429
        # another address is not locked out by this one
        other = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=served.base, transport=other, follow_redirects=False) as web:
            r = web.post("/login", data={"token": "adm"}, headers=own(served))
            assert r.status_code == 303, r.text
            assert web.get("/api/tasks", headers=ADM).status_code == 200
        log = served.log.read_text()
        assert "guess-" not in log and "adm" not in log  # never a token in the log
    finally:
        served.stop()


def test_wrong_api_tokens_are_throttled(tmp_path: Path) -> None:
    served = _throttled_server(tmp_path)
    try:
        with httpx.Client(base_url=served.base) as web:
            codes = [
                web.get("/api/tasks", headers={"Authorization": f"Bearer g{i}"}).status_code
                for i in range(300)
            ]
            assert codes.count(401) <= 10 and codes.count(429) >= 290, codes[:20]
            # requests that offer no token are not guesses: a health probe still gets its 401
            assert web.get("/api/tasks").status_code == 401
            # nor are webhook deliveries: their 401 is a bad signature, and they keep coming
            hook = {"Authorization": "Bearer x", "webhook-id": "m", "webhook-timestamp": "1"}
            for _ in range(20):
                assert web.post("/webhooks/pay", content=b"{}", headers=hook).status_code == 401
    finally:
        served.stop()


def _login_cookie(s: Serve, headers: dict[str, str] | None = None) -> str:
    r = httpx.post(
        s.base + "/login",
        data={"token": "adm"},
        headers={**own(s), **(headers or {})},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    return str(r.headers["set-cookie"])


def _secure(set_cookie: str) -> bool:
    return "secure" in [p.strip().lower() for p in set_cookie.split(";")]


def test_cookie_is_secure_over_https_or_when_told(served: Serve, tmp_path: Path) -> None:
    plain = _login_cookie(served)
    assert not _secure(plain) and "httponly" in plain.lower() and "samesite=strict" in plain.lower()
    # behind a TLS-terminating proxy on this host, declared with --forwarded-allow-ips (an
    # undeclared one's X-Forwarded-Proto is not believed: the origin is then http://)
    https = {"X-Forwarded-Proto": "https", "Origin": f"https://127.0.0.1:{served.port}"}
    assert (
        httpx.post(served.base + "/login", data={"token": "adm"}, headers=https).status_code == 403
    )
    proxied = Serve(
        tmp_path, f"sqlite:///{tmp_path}/secure.db", "--forwarded-allow-ips", "127.0.0.1"
    )
    try:
        https = {"X-Forwarded-Proto": "https", "Origin": f"https://127.0.0.1:{proxied.port}"}
        assert _secure(_login_cookie(proxied, https))
    finally:
        proxied.stop()
    for args, env in (
        (("--secure-cookies",), {}),
        ((), {"JOBTRAIL_SECURE_COOKIES": "1"}),
    ):
        told = Serve(tmp_path, f"sqlite:///{tmp_path}/secure.db", *args, env=env)
        try:
            assert _secure(_login_cookie(told)), (args, env)
            out = httpx.post(told.base + "/logout", headers=own(told), follow_redirects=False)
            assert _secure(out.headers["set-cookie"])
        finally:
            told.stop()
    never = Serve(
        tmp_path,
        f"sqlite:///{tmp_path}/secure.db",
        "--no-secure-cookies",
        "--forwarded-allow-ips",
        "127.0.0.1",
    )
    try:
        https = {"X-Forwarded-Proto": "https", "Origin": f"https://127.0.0.1:{never.port}"}
        assert not _secure(_login_cookie(never, https))
    finally:
        never.stop()
