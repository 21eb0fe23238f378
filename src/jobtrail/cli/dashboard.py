"""``jobtrail dashboard``: the web dashboard alone (``web/dashboard/``), on loopback, no tokens.

``jobtrail serve`` serves the same pages at ``/`` next to the API, with its tokens. Registered on
the ``jobtrail`` group by importing this module (``cli/__init__.py`` does). On a base install
(no ``jobtrail[server]`` extra) it says in one line which extra to install, as ``serve`` does.
"""

from __future__ import annotations

import click

from .base import Fail, Runtime, http_limits, missing_server_extra, verb

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@verb("dashboard")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on: 127.0.0.1, localhost or ::1 (the dashboard alone has no tokens).",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="TCP port."
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A Host name to answer (repeatable). Default: 127.0.0.1, localhost and [::1] "
    "(DNS rebinding). Env: JOBTRAIL_ALLOWED_HOSTS (comma-separated).",
)
@http_limits
def dashboard(
    rt: Runtime,
    host: str,
    port: int,
    allowed_hosts: tuple[str, ...],
    read_timeout: float,
    max_connections: int | None,
) -> None:
    """Serve the web dashboard alone, on loopback only and without tokens (jobtrail serve
    serves it at / next to the API, with tokens)."""
    try:
        from ..web import serving
        from ..web.connections import default_max_connections
        from ..web.dashboard import create_dashboard_app
    except ImportError as exc:  # the base install: the HTTP parts are an extra
        raise Fail(missing_server_extra("the dashboard", exc)) from None
    if host not in LOOPBACK:
        raise Fail("the dashboard alone has no tokens: it binds to loopback only")
    try:
        web = create_dashboard_app(rt.app(), allowed_hosts=list(allowed_hosts) or None)
    except ValueError as exc:
        raise Fail(str(exc)) from None
    serving.run(
        web,
        host=host,
        port=port,
        read_timeout=read_timeout,
        max_connections=max_connections or default_max_connections(),
    )
