"""A real PgBouncer (Debian's ``pgbouncer``) in front of the test PostgreSQL, for the tests that
run through a pooler: one process per test session on a free port, started as the
``postgres`` OS user when the tests run as root (PgBouncer refuses root), from an ini written
into a temporary directory.

Each test store gets its own PgBouncer database entries (``tx_<schema>`` in
``pool_mode=transaction``, ``se_<schema>`` in ``pool_mode=session``) pointing at the test
database, with ``connect_query`` setting ``search_path`` to the test's schema on each *server*
connection PgBouncer opens. A per-test schema through a startup parameter
(``options=-csearch_path``) does not work through PgBouncer (it refuses unknown startup
parameters, and in transaction mode a client's session settings would reach other clients);
server connections are pooled per database entry, so a test's statements only ever run on
sessions whose ``search_path`` is its own schema.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def available() -> str | None:
    """``None`` when PgBouncer can be run here, else why not."""
    if not os.path.exists(PGBOUNCER):
        return "pgbouncer is not installed (Debian package pgbouncer)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Bouncer:
    """One PgBouncer process in front of the PostgreSQL at ``pg_url``."""

    def __init__(self, pg_url: str) -> None:
        parts = urlsplit(pg_url)
        self.pg_host = parts.hostname or "127.0.0.1"
        self.pg_port = parts.port or 5432
        self.pg_db = parts.path.lstrip("/") or "postgres"
        self.user = parts.username or "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix="jobtrail-pgbouncer-"))
        self.dir.chmod(0o777)  # PgBouncer runs as the postgres OS user: its log goes here
        self.port = _free_port()
        self.databases: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False  # once up, the port is the clients': a restart keeps it
        self._write()

    # -- configuration ---------------------------------------------------------------------
    def _write(self) -> None:
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        lines = [f"{name} = {spec}" for name, spec in self.databases.items()]
        ini = "\n".join(
            [
                "[databases]",
                *lines,
                "",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {self.dir / 'users.txt'}",
                f"admin_users = {self.user}",
                "pool_mode = transaction",
                "default_pool_size = 8",
                "max_client_conn = 1000",
                "max_db_connections = 8",
                "server_idle_timeout = 10",
                "server_lifetime = 600",
                f"logfile = {self.dir / 'pgbouncer.log'}",
                "",
            ]
        )
        path = self.dir / "pgbouncer.ini"
        path.write_text(ini)
        for p in self.dir.iterdir():
            p.chmod(0o666)

    def _spec(self, schema: str, mode: str) -> str:
        return (
            f"host={self.pg_host} port={self.pg_port} dbname={self.pg_db} user={self.user} "
            f"pool_mode={mode} connect_query='SET search_path TO {schema}'"
        )

    def add(self, schema: str) -> dict[str, str]:
        """Database entries for ``schema``: ``{"transaction": url, "session": url}``."""
        self.databases[f"tx_{schema}"] = self._spec(schema, "transaction")
        self.databases[f"se_{schema}"] = self._spec(schema, "session")
        self._write()
        self.admin("RELOAD")
        return {
            "transaction": self.url(f"tx_{schema}"),
            "session": self.url(f"se_{schema}"),
        }

    def remove(self, schema: str) -> None:
        """Close the schema's client and server connections (before its schema is dropped)."""
        for name in (f"tx_{schema}", f"se_{schema}"):
            if self.databases.pop(name, None) is not None and self.running:
                try:
                    self.admin(f"KILL {name}")
                except psycopg.Error:
                    pass
        self._write()

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def admin(self, command: str) -> list[tuple[Any, ...]]:
        """A command on PgBouncer's admin console (simple query protocol)."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(command.encode("ascii"), prepare=False)
            return cur.fetchall() if cur.description else []

    # -- process ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start PgBouncer and wait until its admin console answers. The port was free when
        it was picked, but another run on this machine (CI runs two test processes at once)
        may take it first: the first start then moves to another free port; a restart keeps
        its port, which the clients' URLs name."""
        for tries_left in (2, 1, 0):
            seen = len(self.log())
            if self._launch(seen):
                self.started = True
                return
            if self.started or tries_left == 0 or "cannot listen" not in self.log()[seen:]:
                raise RuntimeError(f"pgbouncer did not start: {self.log()[-2000:]}")
            self.port = _free_port()
            self._write()

    def _launch(self, seen: int) -> bool:
        """Whether PgBouncer came up; ``seen``: the length of its log before this launch."""
        command = [PGBOUNCER, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:  # PgBouncer will not run as root: it switches to postgres
            pwd.getpwnam("postgres")  # KeyError here rather than a silent exit there
            command[1:1] = ["-u", "postgres"]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            # a port taken (by another run's PgBouncer, say): ours says so and keeps trying
            # without listening, while the other one would answer the console
            if not self.running or "cannot listen" in self.log()[seen:]:
                self.stop()
                return False
            try:
                if self._answering():
                    return True
            except psycopg.Error:
                pass
            if time.monotonic() > deadline:
                self.stop()
                return False
            time.sleep(0.05)

    def _answering(self) -> bool:
        """Whether the PgBouncer on our port is ours (its log file is in our directory)."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True, connect_timeout=1) as conn:
            rows = conn.execute(b"SHOW CONFIG", prepare=False).fetchall()
        return any(r[0] == "logfile" and r[1] == str(self.dir / "pgbouncer.log") for r in rows)

    def kill(self) -> None:
        """SIGKILL: every client and server connection through it is cut at once."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
