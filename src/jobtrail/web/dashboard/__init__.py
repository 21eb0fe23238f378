"""The web dashboard for people on call (issue 5): server-rendered pages over one ``App``.

``router(app, authorize=None)`` gives the routes to include in a larger FastAPI app (the HTTP
API); ``create_dashboard_app(app)`` serves the dashboard alone
(``jobtrail dashboard --app module:attr``).
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse

from ...app import App
from ..hosts import HostGuard
from ..hosts import allowed_hosts as allowed_hosts_for
from . import bulk_routes  # noqa: F401  (adds the bulk actions to ``routes``)
from .headers import SecurityHeaders
from .origin import OriginGuard
from .routes import Authorize, router, templates

__all__ = ["Authorize", "create_dashboard_app", "router"]


def create_dashboard_app(
    app: App,
    authorize: Authorize | None = None,
    *,
    allowed_hosts: str | Sequence[str] | None = None,
) -> FastAPI:
    """A FastAPI application serving only the dashboard of ``app``. Without ``authorize``
    everyone who reaches it may act, so it answers only the loopback ``Host`` names unless
    ``allowed_hosts`` (or ``JOBTRAIL_ALLOWED_HOSTS``) lists others (DNS rebinding);
    with ``authorize`` it answers any name unless told otherwise."""
    web = FastAPI(title="jobtrail dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    web.include_router(router(app, authorize=authorize))
    web.add_middleware(OriginGuard)
    hosts = allowed_hosts_for(allowed_hosts, has_tokens=authorize is not None)
    web.add_middleware(HostGuard, hosts=hosts)
    web.add_middleware(SecurityHeaders)

    @web.exception_handler(HTTPException)
    async def error_page(request: Request, exc: HTTPException) -> HTMLResponse:
        return templates.TemplateResponse(
            request,
            "error.html",
            {"nav": "", "status": exc.status_code, "detail": exc.detail},
            status_code=exc.status_code,
            headers=exc.headers,
        )

    return web
