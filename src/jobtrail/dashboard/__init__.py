"""The documented name of the dashboard (``jobtrail.dashboard.router``,
``jobtrail.dashboard.create_dashboard_app``, ``python -m jobtrail.dashboard``); it lives in
``jobtrail.web.dashboard``, beside the HTTP API that mounts it."""

from ..web.dashboard import Authorize, create_dashboard_app, router

__all__ = ["Authorize", "create_dashboard_app", "router"]
