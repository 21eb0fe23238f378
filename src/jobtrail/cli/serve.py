"""``jobtrail serve``: the HTTP API (docs/http.md) under uvicorn.

Registered on the ``jobtrail`` group by importing this module (``cli/__init__.py`` does).
"""

from __future__ import annotations

import logging

import click

from ..store import failures
from . import format as fmt
from .base import Fail, Runtime, missing_server_extra, verb


@verb("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="TCP port."
)
@click.option(
    "--secure-cookies/--no-secure-cookies",
    default=None,
    envvar="JOBTRAIL_SECURE_COOKIES",
    help="Mark the dashboard's session cookie Secure always / never "
    "(default: when the request came over HTTPS). Env: JOBTRAIL_SECURE_COOKIES.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A Host name to answer (repeatable; '*' any). Default: without tokens only "
    "127.0.0.1, localhost and [::1] (DNS rebinding); with tokens any. "
    "Env: JOBTRAIL_ALLOWED_HOSTS (comma-separated).",
)
@click.option(
    "--forwarded-allow-ips",
    envvar="JOBTRAIL_FORWARDED_ALLOW_IPS",
    default=None,
    metavar="IPS",
    help="The proxies (comma-separated addresses, '*' any) whose X-Forwarded-For/-Proto are "
    "believed. Default: none, the client address is the peer's. "
    "Env: JOBTRAIL_FORWARDED_ALLOW_IPS.",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(0.1, 3600),
    default=30.0,
    show_default=True,
    envvar="JOBTRAIL_READ_TIMEOUT",
    help="Seconds a request's headers and body may take to arrive; a slower or silent "
    "connection is closed. Env: JOBTRAIL_READ_TIMEOUT.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 1_000_000),
    default=None,
    envvar="JOBTRAIL_MAX_CONNECTIONS",
    help="Open connections at most; more are closed at once. Default: 1000, or half the "
    "open-files limit when lower. Env: JOBTRAIL_MAX_CONNECTIONS.",
)
def serve(
    rt: Runtime,
    host: str,
    port: int,
    secure_cookies: bool | None,
    allowed_hosts: tuple[str, ...],
    forwarded_allow_ips: str | None,
    read_timeout: float,
    max_connections: int | None,
) -> None:
    """Serve the JSON API, webhooks and /metrics. Tokens come from JOBTRAIL_TOKENS, webhook
    secrets from JOBTRAIL_WEBHOOK_SECRETS; with no tokens only loopback is allowed."""
    try:
        from ..web import serving
        from ..web.connections import default_max_connections
        from ..web.hosts import allowed_hosts as allowed_hosts_for
        from ..web.server import _secrets, _tokens, check_bind, create_app
    except ImportError as exc:  # the base install: the HTTP parts are an extra
        raise Fail(missing_server_extra("serve", exc)) from None
    try:
        tokens = _tokens(None)
        secrets = _secrets(None)
        check_bind(host, tokens)
        hosts = allowed_hosts_for(list(allowed_hosts) or None, has_tokens=bool(tokens))
    except ValueError as exc:
        raise Fail(str(exc)) from None
    fmt.log_to_stderr()
    app = rt.app()  # a missing SQLite file is an error: only `jobtrail migrate` creates one
    if not rt.app_ref:
        logging.getLogger("jobtrail.web").warning(
            "no --app / JOBTRAIL_APP: no task kinds, so POST /api/tasks will refuse"
        )
    # Refuse to start on a store it cannot use: an unreachable or refusing database (the
    # server's answer is the message) or one without the schema is an exit, not a server that
    # answers 503 to every request (EXIT_STORE). Once serving, an outage is a 503 per request.
    # An existing store's schema is brought forward.
    try:
        app.migrate()
    except Exception as exc:
        if not failures.cannot_write(exc):
            raise
        # read-only (a standby) or full: serve what can be read if the schema is there (a
        # read raises SchemaMissing if not); every write answers 503
        app.list(limit=1)
        logging.getLogger("jobtrail.web").warning(
            "the store cannot write (%s): serving reads, writes answer 503",
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
        )
    logging.getLogger("jobtrail.web").info("serving %s", fmt.describe_url(app.url))
    web = create_app(
        app, tokens, secrets, secure_cookies=secure_cookies, allowed_hosts=_names(hosts)
    )
    serving.run(
        web,
        host=host,
        port=port,
        read_timeout=read_timeout,
        max_connections=max_connections or default_max_connections(),
        forwarded_allow_ips=forwarded_allow_ips,
    )


def _names(hosts: frozenset[str] | None) -> list[str]:
    return ["*"] if hosts is None else sorted(hosts)
