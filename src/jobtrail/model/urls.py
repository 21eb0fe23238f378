"""Database URLs as people may see them: the password masked (messages, logs, ``doctor``)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """The database URL without its password (safe to print)."""
    try:
        parts = urlsplit(url)
        password, port = parts.password, parts.port
    except ValueError:
        return url
    if password is None:
        return url
    host = parts.hostname or ""
    if port is not None:
        host = f"{host}:{port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
