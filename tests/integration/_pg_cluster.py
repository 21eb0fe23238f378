"""A PostgreSQL server a test may crash, stop and restart: by default a private, throwaway
cluster (``initdb`` in a temporary directory, a free port on 127.0.0.1, run as the ``postgres``
user), never the shared server on :5432 that other test runs use. Used by
``test_pg_restart.py`` and the chaos tests' outages under load."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from _integration_helpers import wait_until

SHARED_URL = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_version() -> str | None:
    try:
        versions = [v for v in os.listdir("/etc/postgresql") if v.replace(".", "").isdigit()]
    except OSError:
        versions = []
    if not versions:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        versions = [p.parts[-3] for p in found]
    return max(versions, key=float) if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """A PostgreSQL server this module may stop and restart."""

    url: str  # a database the tests may create schemas in

    def ctl(self, action: str) -> None:
        raise NotImplementedError

    def accepts_connections(self) -> bool:
        try:
            with psycopg.connect(self.url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def ensure_running(self) -> None:
        if not self.accepts_connections():
            try:
                self.ctl("start")
            except subprocess.CalledProcessError as exc:  # e.g. someone started it meanwhile
                print(f"start: {exc.stderr!r}")
        wait_until(
            self.accepts_connections,
            timeout=60,
            what="PostgreSQL to accept connections",
            interval=0.2,
        )

    def started_at(self) -> Any:
        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]  # type: ignore[index]

    def close(self) -> None:
        pass


class PrivateCluster(PgServer):
    def __init__(self, version: str) -> None:
        self.bin = Path(f"/usr/lib/postgresql/{version}/bin")
        self.user = pwd.getpwnam("postgres")
        self.dir = Path(tempfile.mkdtemp(prefix="jobtrail-pg-restart-"))
        os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self.data = self.dir / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-N", "-E", "UTF8"
        )
        self.ctl("start")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.bin / tool), *args],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=self.dir,
        )

    def ctl(self, action: str) -> None:
        if action == "crash":  # every backend killed at once, no shutdown checkpoint
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
            return
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        args = ["-D", str(self.data), "-w", "-t", "60", "-l", str(self.dir / "server.log")]
        if action in ("stop", "restart"):
            args += ["-m", "fast"]
        self._run("pg_ctl", action, *args, "-o", options)

    def close(self) -> None:
        try:
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class SharedCluster(PgServer):
    def __init__(self, version: str) -> None:
        self.version = version
        self.url = SHARED_URL

    def ctl(self, action: str) -> None:
        mode = ["--mode", "immediate"] if action == "crash" else []
        subprocess.run(
            [
                "pg_ctlcluster",
                "--skip-systemctl-redirect",
                *mode,
                self.version,
                "main",
                "stop" if action == "crash" else action,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def private_cluster_missing() -> str | None:
    """Why a private cluster cannot be made here, or ``None``."""
    version = _pg_version()
    if version is None or os.geteuid() != 0:
        return "needs a local PostgreSQL installation and root to stop and start it"
    initdb = Path(f"/usr/lib/postgresql/{version}/bin/initdb")
    if shutil.which("runuser") is None or not initdb.exists():
        return "needs initdb/pg_ctl and runuser for a private PostgreSQL cluster"
    return None
