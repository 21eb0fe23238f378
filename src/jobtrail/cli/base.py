"""The ``jobtrail`` command line (docs/cli.md): a thin layer over ``App``'s public methods.

This module holds the group, ``Fail``, ``Runtime`` and ``verb``; the verbs live in
``commands.py``, ``ops.py`` and ``serve.py``, registered by ``cli/__init__.py``.

Every verb takes ``--db URL`` and ``--json``; verbs that need the task kinds learn them from
``--app module:attr`` (or ``JOBTRAIL_APP``). One exit code per kind of error (``EXIT_CODES``,
printed in docs/cli.md): expected errors print one line on stderr, never a traceback.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sqlite3
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import click

from ..app import App
from ..app.facade import rebound
from ..model import i18n, validate
from ..model.errors import JobtrailError, SchemaMissing, StoreUnavailable, UnknownKind
from ..model.models import Transition
from ..model.timeparse import looks_like_duration, parse_duration, parse_time
from ..store import failures
from . import format as fmt

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_STORE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: The exit codes of every verb, one per kind of error (docs/cli.md prints this table).
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success (`doctor`: every check passed)"),
    (
        EXIT_REFUSED,
        "the operation was refused or failed: unknown task id, illegal transition, "
        "idempotency conflict; `check` found violations; `doctor` found a problem",
    ),
    (
        EXIT_USAGE,
        "bad input: usage, a malformed option or PAYLOAD_JSON, a bad time, URL or --app, an "
        "unknown task kind (with or without --app), a payload over the limit; `serve` "
        "without the `jobtrail[server]` extra installed",
    ),
    (
        EXIT_STORE,
        "the store cannot be used: unreachable or refusing the connection (the server's "
        "answer is printed), no jobtrail schema or no database file (run `jobtrail migrate`), "
        "disk full or read-only",
    ),
    (EXIT_INTERRUPTED, "interrupted: Ctrl-C, or a second SIGINT that stopped a worker at once"),
)
# the bounds of the numeric options (docs/security.md) are the library's own (model/validate.py)
MAX_PRIORITY = validate.MAX_PRIORITY
MAX_CONCURRENCY, MAX_PREFETCH = validate.MAX_CONCURRENCY, validate.MAX_PREFETCH
MAX_POLL, MAX_GRACE = validate.MAX_POLL, validate.MAX_GRACE
DEFAULT_URL = "sqlite:///jobtrail.db"
NO_SCHEMA = "the database has no jobtrail schema; run `jobtrail migrate`"


#: The extra that brings the HTTP API, the dashboard and /metrics (fastapi, uvicorn, ...).
SERVER_EXTRA = "jobtrail[server]"


def missing_server_extra(what: str, exc: ImportError) -> str:
    """The one line ``serve`` (and ``dashboard``) says on a base install."""
    missing = exc.name or str(exc)
    return (
        f"{what} needs the {SERVER_EXTRA} extra ({missing} is not installed): "
        f"pip install '{SERVER_EXTRA}'"
    )


def http_limits(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--read-timeout`` and ``--max-connections``: the bounds of a server verb (``serve``,
    ``dashboard``) on slow and idle clients."""
    command = click.option(
        "--max-connections",
        type=click.IntRange(1, 1_000_000),
        default=None,
        envvar="JOBTRAIL_MAX_CONNECTIONS",
        help="Open connections at most; more are closed at once. Default: 1000, or half the "
        "open-files limit when lower. Env: JOBTRAIL_MAX_CONNECTIONS.",
    )(command)
    return click.option(
        "--read-timeout",
        type=click.FloatRange(0.1, 3600),
        default=30.0,
        show_default=True,
        envvar="JOBTRAIL_READ_TIMEOUT",
        help="Seconds a request's headers and body may take to arrive; a slower or silent "
        "connection is closed. Env: JOBTRAIL_READ_TIMEOUT.",
    )(command)


class Fail(Exception):
    """An expected error: one line on stderr and an exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(" ".join(message.split()))
        self.code = code


def load_app(ref: str) -> App:
    """The ``App`` named by ``module:attr`` (the current directory is importable, as in
    uvicorn)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise Fail(f"--app must look like module:attr (e.g. myproject.tasks:app), not {ref!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise Fail(
                f"--app {ref}: no module named {module_name!r} (looked in the current "
                "directory and on sys.path)"
            ) from None
        raise Fail(f"--app {ref}: importing {module_name!r} failed: {exc}") from None
    except Exception as exc:
        raise Fail(
            f"--app {ref}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise Fail(f"--app {ref}: module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(obj, App):
        raise Fail(f"--app {ref}: {attr!r} is a {type(obj).__name__}, not a jobtrail.App")
    return obj


def _rebind(loaded: App, url: str, pooler: str | None, listen_url: str | None) -> App:
    """The loaded app's registrations on another database or pooler (an explicit ``--db``,
    ``--pooler`` or ``--listen-url``)."""
    return rebound(loaded, url, pooler=pooler, listen_url=listen_url)


def _require_database(url: str) -> None:
    """Refuse to use a SQLite file that does not exist (and so never create a stray one: every
    verb but ``migrate`` calls this, ``worker``, ``enqueue`` and ``serve`` included)."""
    if not url.startswith("sqlite:"):
        return
    from ..store.sqlite import path_from_url

    path = os.path.abspath(path_from_url(url))  # the current directory's, as the App opens it
    if not os.path.exists(path):
        raise SchemaMissing(
            url,
            f"no database file at {path} (only `jobtrail migrate` creates one; if the "
            "database is elsewhere, pass --db URL or set JOBTRAIL_DATABASE_URL)",
        )


class Runtime:
    """One verb's view of the options every verb shares."""

    def __init__(
        self,
        db: str | None,
        app_ref: str | None,
        as_json: bool,
        pooler: str | None = None,
        listen_url: str | None = None,
    ) -> None:
        self.db = db
        self.app_ref = app_ref
        self.as_json = as_json
        self.pooler = pooler
        self.listen_url = listen_url
        self._app: App | None = None

    def app(self, *, must_exist: bool = True) -> App:
        if self._app is None:
            loaded = load_app(self.app_ref) if self.app_ref else None
            if loaded is None:
                app = App(
                    self.db or os.environ.get("JOBTRAIL_DATABASE_URL") or DEFAULT_URL,
                    pooler=self.pooler,
                    listen_url=self.listen_url,
                )
            elif (
                (self.db is not None and self.db != loaded.url)
                or (self.pooler is not None and self.pooler != loaded.pooler)
                or (self.listen_url is not None and self.listen_url != loaded.listen_url)
            ):
                app = _rebind(loaded, self.db or loaded.url, self.pooler, self.listen_url)
            else:
                app = loaded
            self._app = app
            if must_exist:
                _require_database(app.url)
        return self._app

    def db_now(self) -> datetime:
        app = self.app()
        return app.db_now()

    def emit(self, data: Any, text: str) -> None:
        # people's text is made printable here, once for every verb; JSON stays exact
        click.echo(fmt.to_json(data) if self.as_json else fmt.printable(text))

    def close(self) -> None:
        if self._app is not None:
            self._app.close()


def _db_error(exc: Exception) -> Fail:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "no such table" in text or type(exc).__name__ == "UndefinedTable":
        return Fail(NO_SCHEMA, EXIT_STORE)
    if failures.unreachable(exc):
        return Fail(f"{failures.UNREACHABLE} ({text})", EXIT_STORE)
    if isinstance(exc, sqlite3.Error):
        return Fail(f"database error: {text}", EXIT_REFUSED)
    return Fail(f"cannot use the database: {text}", EXIT_REFUSED)


def _failure(exc: Exception) -> Exception:
    """The one-line ``Fail`` an expected error becomes, with the exit code of its kind;
    ``exc`` itself when it is not expected (a bug: the traceback is wanted)."""
    text = _first_line(exc)
    if failures.cannot_write(exc):  # before JobtrailError: StoreUnavailable may wrap it
        return Fail(f"{failures.CANNOT_WRITE} ({text})", EXIT_STORE)
    if isinstance(exc, StoreUnavailable):  # SchemaMissing too: its message names the command
        return Fail(str(exc), EXIT_STORE)
    if isinstance(exc, UnknownKind):  # bad input, the same with and without --app
        return Fail(str(exc), EXIT_USAGE)
    if isinstance(exc, JobtrailError):
        return Fail(str(exc), EXIT_REFUSED)
    if isinstance(exc, ValueError | TypeError):
        return Fail(str(exc), EXIT_USAGE)
    # the nets under the bounds every option has: a value no clock or store can hold
    if isinstance(exc, OverflowError):
        return Fail(f"a number or time is out of range ({text})", EXIT_USAGE)
    if isinstance(exc, sqlite3.Error) or type(exc).__module__.startswith("psycopg"):
        if str(getattr(exc, "sqlstate", None) or "").startswith("22"):  # data exception
            return Fail(f"the store refused a value: {text}", EXIT_USAGE)
        return _db_error(exc)
    return exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jobtrail", prog_name="jobtrail", message="%(prog)s %(version)s")
def cli() -> None:
    """jobtrail — durable background tasks whose every state can be explained."""


def verb(
    name: str, group: click.Group | None = None
) -> Callable[[Callable[..., int | None]], click.Command]:
    """Register a verb (on ``group``, e.g. ``cron list``): add ``--db``, ``--app`` and
    ``--json``, and turn expected errors into one line on stderr with the exit code of their
    kind."""

    def decorate(fn: Callable[..., int | None]) -> click.Command:
        @functools.wraps(fn)
        def run(
            db: str | None,
            app_ref: str | None,
            as_json: bool,
            pooler: str | None,
            listen_url: str | None,
            **params: Any,
        ) -> int:
            rt = Runtime(db, app_ref, as_json, pooler, listen_url)
            if name != "worker":  # the one-line error says it; no pool warnings on stderr
                logging.getLogger("psycopg").setLevel(logging.ERROR)
            try:
                return fn(rt, **params) or EXIT_OK
            except (Fail, click.ClickException):
                raise
            except Exception as exc:
                failure = _failure(exc)
                if failure is exc:
                    raise
                raise failure from None
            finally:
                rt.close()

        run = click.option(
            "--json", "as_json", is_flag=True, help="Machine output: one JSON document on stdout."
        )(run)
        run = click.option(
            "--app",
            "app_ref",
            metavar="MODULE:ATTR",
            envvar="JOBTRAIL_APP",
            help="Your jobtrail.App, e.g. myproject.tasks:app [env JOBTRAIL_APP].",
        )(run)
        run = click.option(
            "--listen-url",
            metavar="URL",
            envvar="JOBTRAIL_LISTEN_URL",
            help="PostgreSQL URL for LISTEN (direct or session-pooled) when --pooler "
            "transaction [env JOBTRAIL_LISTEN_URL].",
        )(run)
        run = click.option(
            "--pooler",
            type=click.Choice(["transaction", "session"]),
            envvar="JOBTRAIL_POOLER",
            help="The pooler in front of PostgreSQL: transaction (PgBouncer "
            "pool_mode=transaction: no prepared statements, no session state, LISTEN only "
            "through --listen-url) or session [env JOBTRAIL_POOLER].",
        )(run)
        run = click.option(
            "--db",
            metavar="URL",
            help="Database URL [default: the --app's URL, else env "
            f"JOBTRAIL_DATABASE_URL, else {DEFAULT_URL}].",
        )(run)
        return (group or cli).command(name)(run)

    return decorate


def _required(name: str) -> Callable[[Any], Any]:
    """A required text option (``--by``, ``--note``)."""
    return click.option(
        f"--{name}",
        required=True,
        metavar="TEXT" if name == "note" else "WHO",
        help="Who does it (recorded)." if name == "by" else "Why (recorded).",
    )


def lang_option(fn: Callable[..., Any]) -> Any:
    """``--lang en|zh`` for a verb's text for people (``--json`` is never translated)."""
    return click.option(
        "--lang",
        type=click.Choice(list(i18n.LANGUAGES)),
        default=i18n.DEFAULT,
        envvar=i18n.ENV,
        show_default=True,
        help=i18n.t("cli.lang_help"),
    )(fn)


def _time_arg(rt: Runtime, value: str | None, name: str) -> datetime | None:
    """ISO 8601, or a duration ago (``30m``, ``2h``, ``7d``) by the database clock."""
    if value is None:
        return None
    if looks_like_duration(value):
        return rt.db_now() - timedelta(seconds=parse_duration(value, name))
    try:
        return parse_time(value, name)
    except ValueError:
        raise Fail(
            f"{name} takes an ISO 8601 time (2026-11-29T10:00:00Z) or a duration ago "
            f"(30m, 2h, 7d), not {value!r}"
        ) from None


def _transitions(app: App, task_id: str) -> list[Transition]:
    found: Any = app.transitions(task_id)  # Any: App.list shadows ``list`` in the facade's hints
    return list(found)


# -- verbs -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    """The ``jobtrail`` console script."""
    try:
        result = cli.main(args=argv, prog_name="jobtrail", standalone_mode=False)
        code = result if isinstance(result, int) else EXIT_OK
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        code = EXIT_USAGE
    except Fail as exc:
        click.echo(fmt.printable(f"jobtrail: error: {exc}"), err=True)
        code = exc.code
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(fmt.printable(f"jobtrail: error: {exc.format_message()}{hint}"), err=True)
        code = EXIT_USAGE
    except click.ClickException as exc:
        click.echo(fmt.printable(f"jobtrail: error: {exc.format_message()}"), err=True)
        code = exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("jobtrail: interrupted", err=True)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 141
    sys.exit(code)
