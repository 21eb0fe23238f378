"""The HTTP side of jobtrail (docs/http.md): a JSON API, signed webhooks and Prometheus metrics on
FastAPI. ``create_app(app, tokens=..., webhook_secrets=...)`` builds the ASGI application;
``jobtrail serve`` runs it under uvicorn."""

from .server import create_app

__all__ = ["create_app"]
