"""A PostgreSQL URL that cannot work fails at once with the server's own answer (issue 17
item 5): a database or role that does not exist, a closed port. The pool used to retry such a
connection in the background until its checkout timed out and then said only
``PoolTimeout``; ``connect_timeout=30`` here would make that a 30 s wait."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import PG_URL, require_pg

import jobtrail

SLOW = 30.0  # the pool's checkout timeout in these tests: a wait would be this long


def _with(**parts: Any) -> str:
    url = urlsplit(PG_URL)
    netloc = f"{parts.get('user', url.username)}@{url.hostname}:{parts.get('port', url.port)}"
    path = "/" + parts.get("db", url.path.lstrip("/"))
    return urlunsplit(url._replace(netloc=netloc, path=path, query=""))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nobody listens


CASES = {
    "no such database": (
        lambda: _with(db="jobtrail_no_such_db"),
        'database "jobtrail_no_such_db" does not exist',
    ),
    "no such role": (
        lambda: _with(user="jobtrail_no_such_role"),
        'role "jobtrail_no_such_role" does not exist',
    ),
    "closed port": (lambda: _with(port=_closed_port()), "Connection refused"),
}
USES: dict[str, Callable[[jobtrail.App], object]] = {
    "get (a pooled transaction)": lambda app: app.get("1"),
    "enqueue (the express connection)": lambda app: app.enqueue("k", {}),
    "migrate": lambda app: app.migrate(),
    "list": lambda app: app.list(),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("use", sorted(USES))
def test_a_wrong_url_fails_at_once_with_the_servers_answer(case: str, use: str) -> None:
    require_pg()
    make_url, answer = CASES[case]
    with jobtrail.App(make_url(), connect_timeout=SLOW) as app:

        @app.task("k")
        def k(payload: Any) -> None:
            return None

        started = time.monotonic()
        with pytest.raises(jobtrail.StoreUnavailable) as caught:
            USES[use](app)
        took = time.monotonic() - started
    assert answer in str(caught.value), str(caught.value)
    assert "PoolTimeout" not in str(caught.value)
    assert not isinstance(caught.value, jobtrail.SchemaMissing)
    # not the pool's timeout: the answer came with the first refused attempt
    assert took < SLOW / 3, f"{use} took {took:.1f}s"
