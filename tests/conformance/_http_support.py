"""Helpers for the in-process HTTP tests (FastAPI's TestClient)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

import jobtrail
from jobtrail.web import create_app

TOKENS = "adm:admin,rd:read,ta:admin:tenantA,tar:read:tenantA"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def register(app: jobtrail.App) -> jobtrail.App:
    @app.task("send")
    def send(ctx: Any, payload: Any) -> Any:
        return payload

    @app.task("fail", max_attempts=1)
    def fail(ctx: Any, payload: Any) -> Any:
        raise jobtrail.PermanentError("no", category="invalid_input")

    @app.webhook("pay")
    def pay(ctx: Any, event: Any) -> None:
        return None

    return app


def client(app: jobtrail.App, tokens: str = TOKENS, secrets: str | None = None) -> TestClient:
    """A client of ``create_app``; without tokens at the loopback address, the only ``Host``
    such a server answers."""
    web = create_app(app, tokens=tokens, webhook_secrets=secrets or f"pay={SECRET}")
    base = "http://testserver" if tokens else "http://127.0.0.1"
    return TestClient(web, raise_server_exceptions=False, base_url=base)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
