"""The dashboard takes a state-changing request only from its own origin, through a
real ``jobtrail serve``: every combination of ``Origin`` and ``Sec-Fetch-Site`` a browser (or a
non-browser client) can send, for a form action, ``/login`` and ``/logout``.

The rule: ``Sec-Fetch-Site``, when sent, must be ``same-origin``; ``Origin``, when sent, must be
the request's own ``scheme://host`` (``null`` is refused). A request with neither header comes
from no current browser; it may act only with an ``Authorization: Bearer`` header — the cookie a
browser would attach by itself never suffices — and it may sign in only when it carries no
session cookie (so it can never replace a person's session). ``/api/`` and ``/webhooks/`` take
no cookie and are not affected.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from serve_process import Serve, serving

ADM = {"Authorization": "Bearer adm"}
COOKIE = "jobtrail_token"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    yield from serving(tmp_path_factory, "csrf")


def queued_task(s: Serve) -> str:
    r = httpx.post(s.base + "/api/tasks", json={"kind": "send", "delay": 3600}, headers=ADM)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def state(s: Serve, task_id: str) -> str:
    return str(httpx.get(f"{s.base}/api/tasks/{task_id}", headers=ADM).json()["state"])


def paused(s: Serve, queue: str) -> bool:
    queues = httpx.get(s.base + "/api/queues", headers=ADM).json()["queues"]
    return bool(next(q for q in queues if q["queue"] == queue)["paused"])


def post(s: Serve, path: str, data: dict[str, str], headers: dict[str, str]) -> httpx.Response:
    return httpx.post(s.base + path, data=data, headers=headers, follow_redirects=False)


def own(s: Serve) -> str:
    return f"http://127.0.0.1:{s.port}"


def signed_in(token: str = "adm") -> dict[str, str]:
    return {"Cookie": f"{COOKIE}={token}"}


REFUSED = [
    ("origin null", {"Origin": "null"}),
    ("origin elsewhere", {"Origin": "http://evil.example"}),
    ("same site, other port", {"Origin": "http://127.0.0.1:1"}),
    ("same host, other scheme", {"Origin": "https://{host}"}),
    ("origin null, same-site fetch", {"Origin": "null", "Sec-Fetch-Site": "same-site"}),
    ("same-site fetch, no origin", {"Sec-Fetch-Site": "same-site"}),
    ("cross-site fetch, no origin", {"Sec-Fetch-Site": "cross-site"}),
    ("user-typed (none) is for GETs", {"Sec-Fetch-Site": "none"}),
    ("own origin, cross-site fetch", {"Origin": "http://{host}", "Sec-Fetch-Site": "cross-site"}),
    ("neither header, cookie only", {}),
]
ALLOWED = [
    ("own origin, same-origin fetch", {"Origin": "http://{host}", "Sec-Fetch-Site": "same-origin"}),
    ("own origin only", {"Origin": "http://{host}"}),
    ("same-origin fetch only", {"Sec-Fetch-Site": "same-origin"}),
]


def _fill(s: Serve, headers: dict[str, str]) -> dict[str, str]:
    return {k: v.replace("{host}", f"127.0.0.1:{s.port}") for k, v in headers.items()}


@pytest.mark.parametrize("name,headers", REFUSED, ids=[n for n, _ in REFUSED])
def test_cookie_carrying_cross_origin_actions_are_refused(
    served: Serve, name: str, headers: dict[str, str]
) -> None:
    task = queued_task(served)
    data = {"by": "mallory", "note": "csrf"}
    r = post(served, f"/tasks/{task}/cancel", data, {**signed_in(), **_fill(served, headers)})
    assert r.status_code == 403, (name, r.status_code, r.text)
    assert state(served, task) == "queued"
    r = post(served, "/queues/default/pause", data, {**signed_in(), **_fill(served, headers)})
    assert r.status_code == 403, (name, r.status_code, r.text)
    assert not paused(served, "default")


@pytest.mark.parametrize("name,headers", ALLOWED, ids=[n for n, _ in ALLOWED])
def test_the_dashboards_own_forms_still_act(
    served: Serve, name: str, headers: dict[str, str]
) -> None:
    task = queued_task(served)
    data = {"by": "alice", "note": "asked"}
    r = post(served, f"/tasks/{task}/cancel", data, {**signed_in(), **_fill(served, headers)})
    assert r.status_code == 303 and "done=cancelled" in r.headers["location"], (name, r.text)
    assert state(served, task) == "cancelled"


def test_non_browser_clients_act_with_a_bearer_header_never_the_cookie(served: Serve) -> None:
    data = {"by": "cron-job", "note": "nightly"}
    task = queued_task(served)
    assert post(served, f"/tasks/{task}/cancel", data, ADM).status_code == 303
    assert state(served, task) == "cancelled"
    task = queued_task(served)
    # a bad bearer header is not rescued by a good cookie; a read token may not act
    bad = {"Authorization": "Bearer nope", **signed_in()}
    assert post(served, f"/tasks/{task}/cancel", data, bad).status_code == 401
    read = {"Authorization": "Bearer rd"}
    assert post(served, f"/tasks/{task}/cancel", data, read).status_code == 403
    # a scheme a browser may replay by itself (cached Basic credentials) is not a bearer
    basic = {"Authorization": "Basic YWRtOg==", **signed_in()}
    assert post(served, f"/tasks/{task}/cancel", data, basic).status_code == 403
    assert state(served, task) == "queued"


def test_login_only_from_the_own_origin(served: Serve) -> None:
    for name, headers in REFUSED:
        if not headers:
            continue  # headerless: below
        r = post(served, "/login", {"token": "rd"}, {**signed_in(), **_fill(served, headers)})
        assert r.status_code == 403 and "set-cookie" not in r.headers, (name, r.text)
    # a signed-in person's cookie cannot be swapped by a request no browser of theirs would send
    r = post(served, "/login", {"token": "rd"}, signed_in())
    assert r.status_code == 403 and "set-cookie" not in r.headers
    for name, headers in ALLOWED:
        r = post(served, "/login", {"token": "rd"}, {**signed_in(), **_fill(served, headers)})
        assert r.status_code == 303 and f"{COOKIE}=rd" in r.headers["set-cookie"], name
    # a non-browser client with no session signs in (and learns a wrong token is wrong)
    assert post(served, "/login", {"token": "wrong"}, {}).status_code == 401
    r = post(served, "/login", {"token": "adm"}, {})
    assert r.status_code == 303 and f"{COOKIE}=adm" in r.headers["set-cookie"]


def test_reads_and_the_token_api_are_not_affected(served: Serve) -> None:
    # a GET changes nothing: a link from elsewhere, or a typed URL, still opens a page
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "none"}, {}):
        assert httpx.get(served.base + "/", headers={**ADM, **headers}).status_code == 200
    # the JSON API takes bearer tokens only, so no browser can ride a session there
    task = queued_task(served)
    evil = {**ADM, "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    r = httpx.post(
        f"{served.base}/api/tasks/{task}/cancel", json={"by": "ops", "note": "n"}, headers=evil
    )
    assert r.status_code == 200 and state(served, task) == "cancelled"


def test_the_refusal_names_the_rule(served: Serve) -> None:
    task = queued_task(served)
    r = post(served, f"/tasks/{task}/cancel", {"by": "b", "note": "n"}, {"Origin": "null"})
    assert r.status_code == 403 and "origin" in r.json()["error"].lower()
    r = post(served, f"/tasks/{task}/cancel", {"by": "b", "note": "n"}, {})
    assert r.status_code == 403 and "Authorization: Bearer" in r.json()["error"]
