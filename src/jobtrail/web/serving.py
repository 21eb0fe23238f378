"""Run an ASGI application of ours under uvicorn with the protections of ``connections.py``
and the proxy rule (below): ``jobtrail serve`` and ``jobtrail dashboard`` both start
their server here.

Proxy headers. uvicorn by default believes ``X-Forwarded-For`` and ``X-Forwarded-Proto`` from
127.0.0.1, so any local process could claim any client address — and the failed-token
throttle, keyed on that address, gave it unlimited guesses. Here the headers are believed only
from the proxies named in ``forwarded_allow_ips`` (``--forwarded-allow-ips``,
``JOBTRAIL_FORWARDED_ALLOW_IPS``); without it the client address is the peer's.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from .connections import OncePerMinute, guarded_protocol, quiet_accept_errors

#: uvicorn's own default: an idle connection between two requests is closed after this.
KEEP_ALIVE = 5


def run(
    web: Any,
    *,
    host: str,
    port: int,
    read_timeout: float,
    max_connections: int,
    forwarded_allow_ips: str | None = None,
) -> None:
    """Serve ``web`` on ``host:port`` until interrupted."""
    import uvicorn

    reporter = OncePerMinute()
    proxies = (forwarded_allow_ips or "").strip()
    config = uvicorn.Config(
        web,
        host=host,
        port=port,
        log_level="info",
        http=guarded_protocol(read_timeout, max_connections, reporter),
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
        timeout_keep_alive=KEEP_ALIVE,
    )

    class Server(uvicorn.Server):
        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            quiet_accept_errors(asyncio.get_running_loop(), reporter)
            await super().serve(sockets)

    Server(config).run()
