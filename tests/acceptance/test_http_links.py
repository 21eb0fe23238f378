"""Names put into the dashboard's links and form actions are URL-encoded, and a
tenant-bound token's pages name no other tenant's queue — through a real ``jobtrail serve``.

A queue named ``../tasks/17/cancel?`` used to turn its Resume button into
``/queues/../tasks/17/cancel?/resume``, which a browser resolves to a cancel of task 17.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest
from serve_process import HOSTILE_KIND, HOSTILE_QUEUE, OTHER_TENANTS_QUEUE, Serve, seed_hostile

ADM = {"Authorization": "Bearer adm"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("links")
    url = f"sqlite:///{tmp}/links.db"
    ids = seed_hostile(url)
    assert ids["target"] == "17"
    s = Serve(tmp, url)
    try:
        yield s, ids
    finally:
        s.stop()


def hrefs(page: str) -> list[str]:
    return [html.unescape(u) for u in re.findall(r'(?:href|action)="([^"]*)"', page)]


def test_queue_and_kind_names_are_encoded_in_every_link(site: tuple[Serve, dict[str, str]]) -> None:
    s, ids = site
    pages = {
        "/queues": "/queues/..%2Ftasks%2F17%2Fcancel%3F/resume",
        f"/tasks/{ids['hostile']}": "/?queue=..%2Ftasks%2F17%2Fcancel%3F",
        "/dead": "/?state=dead&kind=boom%26state%3Dsucceeded%23x",
    }
    for path, expected in pages.items():
        page = httpx.get(s.base + path, headers=ADM).text
        links = hrefs(page)
        assert expected in links, (path, links)
        for link in links:  # no raw name anywhere in a URL
            assert HOSTILE_QUEUE not in link and HOSTILE_KIND not in link, (path, link)
    listing = hrefs(httpx.get(s.base + "/queues", headers=ADM).text)
    assert "/?queue=..%2Ftasks%2F17%2Fcancel%3F" in listing


def test_the_encoded_resume_action_resumes_that_queue_only(
    site: tuple[Serve, dict[str, str]],
) -> None:
    s, ids = site
    page = httpx.get(s.base + "/queues", headers=ADM).text
    action = next(a for a in hrefs(page) if a.endswith("/resume"))
    r = httpx.post(
        s.base + action,
        data={"by": "ops", "note": "back"},
        headers={**ADM, "Origin": s.base},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    queues = httpx.get(s.base + "/api/queues", headers=ADM).json()["queues"]
    assert next(q for q in queues if q["queue"] == HOSTILE_QUEUE)["paused"] is False
    assert httpx.get(f"{s.base}/api/tasks/{ids['target']}", headers=ADM).json()["state"] == "queued"
    # and the page it lands on names the queue, encoded in the redirect
    assert "q=..%2Ftasks%2F17%2Fcancel%3F" in r.headers["location"]


def test_a_tenant_bound_token_sees_no_other_tenants_queue(
    site: tuple[Serve, dict[str, str]],
) -> None:
    s, ids = site
    ta = {"Authorization": "Bearer ta"}
    page = httpx.get(s.base + "/", headers=ta).text
    assert f'data-id="{ids["mine"]}"' in page
    assert OTHER_TENANTS_QUEUE not in page and HOSTILE_QUEUE not in html.unescape(page)
    assert "queue-of-a" in page  # its own task's queue, in its own row
    filtered = httpx.get(s.base + "/?queue=queue-of-a", headers=ta).text
    assert f'data-id="{ids["mine"]}"' in filtered and OTHER_TENANTS_QUEUE not in filtered
    # an unbound token still gets the whole list to choose from
    assert OTHER_TENANTS_QUEUE in httpx.get(s.base + "/", headers=ADM).text
