"""Another site, for the browser's CSRF tests: pages that attack the dashboard the way a page
on another origin can — a form that submits itself, and a POST answered with a ``307`` that
makes the browser repeat it (body and all) at the dashboard.

Served on 127.0.0.1 at its own port: as ``http://127.0.0.1:PORT`` it is the dashboard's
*same site* but another origin; as ``http://localhost:PORT`` it is another site altogether.
"""

from __future__ import annotations

import html
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlsplit


def _autosubmit(action: str, fields: dict[str, str]) -> bytes:
    inputs = "".join(
        f'<input name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items()
    )
    return (
        "<!doctype html><title>win a prize</title>"
        f'<form id="f" method="post" action="{html.escape(action)}">{inputs}</form>'
        "<script>document.getElementById('f').submit()</script>"
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        q = self._query()
        route = urlsplit(self.path).path
        if route == "/autosubmit":  # ?action=URL&field=value...
            action = q.pop("action")
            page = _autosubmit(action, q)
        elif route == "/redirector":  # ?to=URL&field=value...: POST here, 307 to URL
            to = q.pop("to")
            page = _autosubmit(f"/redirect?to={quote(to, safe='')}", q)
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if urlsplit(self.path).path != "/redirect":
            self.send_error(404)
            return
        self.server.redirected += 1  # type: ignore[attr-defined]
        self.send_response(307)  # the browser repeats the POST, body and all, at the target
        self.send_header("Location", self._query()["to"])
        self.send_header("Content-Length", "0")
        self.end_headers()


class HostileSite:
    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.redirected = 0  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.same_site = f"http://127.0.0.1:{self.port}"
        self.cross_site = f"http://localhost:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def redirected(self) -> int:
        return int(self.server.redirected)  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
