"""Shared by the chaos tests: PostgreSQL URLs through the fault proxy, and the integration
helpers (worker subprocesses)."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from _integration_helpers import WorkerDir, wait_until  # noqa: E402
from _pg_cluster import PrivateCluster, _pg_version, private_cluster_missing  # noqa: E402

__all__ = [
    "PrivateCluster",
    "WorkerDir",
    "_pg_version",
    "private_cluster_missing",
    "upstream",
    "via",
    "wait_until",
]


def upstream(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def via(url: str, port: int) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{port}"))
