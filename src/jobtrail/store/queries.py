"""Named SQL queries, loaded once per dialect from ``sql/<dialect>/*.sql``.

A file holds blocks that start with ``-- name: <query name>``; the text up to the next such line
is the query. SQL never lives in Python strings, and identifiers are never interpolated.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    matches = list(_NAME.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip()
        name = match.group(1)
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = body
    return queries


@cache
def load(dialect: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    folder = resources.files("jobtrail.store").joinpath("sql", dialect)
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, body in parse(entry.read_text(encoding="utf-8")).items():
                if name in queries:
                    raise ValueError(f"query {name!r} is defined twice for {dialect}")
                queries[name] = body
    return queries


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for each numbered migration file, in order."""
    out = []
    folder = resources.files("jobtrail.store").joinpath("migrations", dialect)
    for entry in folder.iterdir():
        match = re.match(r"^(\d{4})_([a-z0-9_]+)\.sql$", entry.name)
        if match:
            out.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    out.sort()
    return out
