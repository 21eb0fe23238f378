"""Named SQL queries, loaded once per dialect from ``sql/<dialect>/*.sql``.

A file holds blocks that start with ``-- name: <query name>``; the text up to the next such line
is the query. SQL never lives in Python strings, and identifiers are never interpolated.

A block that starts with ``-- fragment: <name>`` is not a query but a piece several queries
share (the claim's UPDATE, say): a query includes it with a line ``-- include: <name>``, which
is replaced by the fragment's text when the queries load. Fragments are defined once per dialect
and include nothing themselves.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_BLOCK = re.compile(r"^--\s*(name|fragment):\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^[ \t]*--\s*include:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """The queries of ``text`` with their includes resolved from the fragments of ``text``."""
    queries, fragments = _blocks(text)
    return resolve(queries, fragments)


def _blocks(text: str) -> tuple[dict[str, str], dict[str, str]]:
    queries: dict[str, str] = {}
    fragments: dict[str, str] = {}
    matches = list(_BLOCK.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip("\n").rstrip()
        kind, name = match.group(1), match.group(2)
        into, what = (queries, "query") if kind == "name" else (fragments, "fragment")
        if name in into:
            raise ValueError(f"{what} {name!r} is defined twice")
        into[name] = body if kind == "fragment" else body.strip()
    return queries, fragments


def resolve(queries: dict[str, str], fragments: dict[str, str]) -> dict[str, str]:
    """``queries`` with each ``-- include: <fragment>`` line replaced by the fragment."""
    for name, body in fragments.items():
        if _INCLUDE.search(body):
            raise ValueError(f"fragment {name!r} includes another; fragments include nothing")

    def fragment(match: re.Match[str]) -> str:
        wanted = match.group(1)
        if wanted not in fragments:
            raise ValueError(f"no fragment {wanted!r} to include")
        return fragments[wanted]

    return {name: _INCLUDE.sub(fragment, body) for name, body in queries.items()}


@cache
def load(dialect: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    fragments: dict[str, str] = {}
    folder = resources.files("jobtrail.store").joinpath("sql", dialect)
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            found, shared = _blocks(entry.read_text(encoding="utf-8"))
            for into, new, what in ((queries, found, "query"), (fragments, shared, "fragment")):
                for name, body in new.items():
                    if name in into:
                        raise ValueError(f"{what} {name!r} is defined twice for {dialect}")
                    into[name] = body
    return {name: compact(sql) for name, sql in resolve(queries, fragments).items()}


def compact(sql: str) -> str:
    """``sql`` without its comment lines and indentation, as it is sent: the comments are for
    readers of the files. psycopg caches the conversion of a query's placeholders only below
    4,096 characters, and the commented claim statements were longer (parsed again on every
    round trip: a tenth of the worker's CPU). Comments after code on a line stay."""
    lines = (line.strip() for line in sql.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("--"))


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
