"""Database URLs as people may see them: the one masker every message, log line and command
output goes through (``redact_url``), and the form start lines show (``describe_url``: the
password masked, a relative SQLite path made absolute).

A password can ride in three places, and each is masked: the URL's user info
(``postgresql://user:secret@host/db``), a ``password=`` or ``sslpassword=`` query parameter
(``postgresql://host/db?password=secret``), and a libpq keyword string
(``host=db password=secret``, the form ``PGPASSWORD`` users write). The masker never parses
the port or the host, so a URL psycopg would refuse is masked all the same.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

MASK = "***"
#: The connection parameters whose value is a secret (libpq's names).
SECRET_KEYS = frozenset({"password", "sslpassword"})

# a libpq keyword string: key = value, the value bare or single-quoted (backslash escapes)
_KEYWORD = re.compile(
    r"(?P<key>\b(?:ssl)?password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'?|[^\s']*)", re.IGNORECASE
)


def redact_url(url: str) -> str:
    """``url`` with every password masked (safe to print or log). Anything that is not a URL
    is treated as a libpq keyword string; text without a password comes back unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return _KEYWORD.sub(lambda m: m.group("key") + MASK, url)
    before_fragment, hash_, fragment = rest.partition("#")
    before_query, q, query = before_fragment.partition("?")
    # the user info ends at the last "@" (a password may hold an unencoded "/" or "@")
    userinfo, at, location = before_query.rpartition("@")
    if at and ":" in userinfo:
        before_query = f"{userinfo.split(':', 1)[0]}:{MASK}@{location}"
    if query:
        query = "&".join(_mask_param(pair) for pair in query.split("&"))
    return f"{scheme}://{before_query}{q}{query}{hash_}{fragment}"


def _mask_param(pair: str) -> str:
    key, eq, _ = pair.partition("=")
    if eq and unquote(key).strip().lower() in SECRET_KEYS:
        return f"{key}={MASK}"
    return pair


def sqlite_path(url: str) -> str | None:
    """The file a ``sqlite:///path`` URL names, as given (relative or absolute); ``None`` for
    anything else (another scheme, no path, ``:memory:``)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :].split("?", 1)[0]
    return path if path and path != ":memory:" else None


def describe_url(url: str) -> str:
    """``url`` as start lines, ``migrate`` and errors name it: no password, and a relative
    SQLite path resolved against the current directory (``sqlite:////abs/path.db``: four
    slashes), so the file meant is never a guess."""
    path = sqlite_path(url)
    if path is not None:
        return "sqlite:///" + os.path.abspath(path)
    return redact_url(url)
