"""The documented name of the dashboard (``jobtrail.dashboard.router``,
``jobtrail.dashboard.create_dashboard_app``, ``python -m jobtrail.dashboard``); it lives in
``jobtrail.web.dashboard``, beside the HTTP API that mounts it.

Its names are loaded on first use: the dashboard needs the ``jobtrail[server]`` extra, and
``python -m jobtrail.dashboard`` runs this module first, so on a base install it can still say
in one line which extra to install (``__main__.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..web.dashboard import Authorize, create_dashboard_app, router

__all__ = ["Authorize", "create_dashboard_app", "router"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ..web import dashboard

        return getattr(dashboard, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
