"""The dashboard inside ``jobtrail serve``: the API's tokens as a bearer header, or as the
session cookie a person gets at ``/login`` and drops at ``/logout``.

The cookie holds the token itself (the server keeps no sessions), ``HttpOnly`` and
``SameSite=Strict``; it is ``Secure`` when the request came over HTTPS (directly or through a
proxy uvicorn trusts for ``X-Forwarded-Proto``) or when ``secure_cookies=True`` says so
(``jobtrail serve --secure-cookies`` / ``JOBTRAIL_SECURE_COOKIES=1``); ``False`` never marks it.
A cookie that no longer authenticates (a rotated token) is cleared with the 401, so a browser
does not keep counting as a failed guess (``throttle.py``).
"""

from __future__ import annotations

from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..app import App
from .auth import Token, authenticate
from .dashboard import router as dashboard_router

COOKIE = "jobtrail_token"
LOGIN_PAGE = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>jobtrail sign in</title>"
    '<link rel="stylesheet" href="/static/dashboard.css"></head><body><main><h1>jobtrail</h1>'
    '<form method="post" action="/login"><label>token '
    '<input name="token" type="password" autocomplete="current-password" autofocus></label> '
    '<button type="submit">Sign in</button></form></main></body></html>'
)


def _secure(request: Request, secure_cookies: bool | None) -> bool:
    return request.url.scheme == "https" if secure_cookies is None else secure_cookies


def _cleared(secure: bool) -> str:
    """The ``Set-Cookie`` value that removes the session cookie."""
    carrier = Response()
    carrier.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=secure)
    return carrier.headers["set-cookie"]


def mount_dashboard(web: FastAPI, app: App, *, secure_cookies: bool | None = None) -> None:
    """Include the dashboard's routes in ``web`` behind ``web.state.tokens``, and serve
    ``/login`` and ``/logout``. The origin rule (``dashboard.origin``) and the throttle are
    middleware the caller installs over the whole application."""
    tokens: list[Token] = web.state.tokens

    def authorize(request: Request, action: str) -> str | None:
        header = request.headers.get("authorization")
        cookie = request.cookies.get(COOKIE)
        who = authenticate(tokens, header or (f"Bearer {cookie}" if cookie else None))
        if who is None:
            stale = cookie is not None and not header  # the cookie was the credential
            drop = {"set-cookie": _cleared(_secure(request, secure_cookies))} if stale else None
            raise HTTPException(401, "sign in with a token at /login", headers=drop)
        if action == "act" and not who.admin:
            raise HTTPException(403, "a read token cannot act")
        return who.tenant

    web.include_router(dashboard_router(app, authorize=authorize, session_cookie=COOKIE))

    @web.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form() -> str:
        return LOGIN_PAGE

    @web.post("/login", include_in_schema=False)
    def login(request: Request, token: str = Form(...)) -> Response:
        if authenticate(tokens, f"Bearer {token}") is None:
            raise HTTPException(401, "unknown token")
        page = RedirectResponse("/", status_code=303)
        secure = _secure(request, secure_cookies)
        page.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure)
        return page

    @web.post("/logout", include_in_schema=False)
    def logout(request: Request) -> Response:
        page = RedirectResponse("/login", status_code=303)
        page.headers["set-cookie"] = _cleared(_secure(request, secure_cookies))
        return page
