"""``python manage.py jobtrail VERB …``: the jobtrail CLI's verbs on the Django project's task
backend (``--backend ALIAS``, default ``"default"``), with Django's settings.

``worker`` takes ``--queues Q,...`` (without it: the backend's ``QUEUES``), ``--concurrency N``
and ``--burst``, and first registers every task of the backend it can find.

``call_command("jobtrail", VERB, *ARGS, backend=ALIAS, stdout=…, stderr=…)`` does what
``manage.py jobtrail VERB ARGS --backend ALIAS`` does (test fixtures, deploy scripts, data
migrations): its output goes to ``stdout``/``stderr``, and a verb that fails raises
``CommandError`` with the CLI's exit code as ``returncode`` instead of ending the process."""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ..... import cli
from .....model.errors import SchemaMissing
from ... import runtime
from ...compat import task_backends

_DJANGO_GLOBAL = ("--settings", "--pythonpath")

#: Verbs that may run on a store without jobtrail's schema (the rest are refused first, with
#: the ``manage.py`` command that creates it).
_NO_SCHEMA_NEEDED = frozenset({"migrate", "doctor"})


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "jobtrail's command line on this project's task backend: migrate, worker [--burst] "
        "[--queues Q,...] [--concurrency N], explain ID, status ID, list, cancel ID, … "
        "(--backend ALIAS picks the TASKS entry; `manage.py jobtrail --help` lists the verbs)"
    )

    def add_arguments(self, parser: Any) -> None:
        # what call_command parses: the verb and its own arguments, handed to jobtrail's CLI
        parser.add_argument("--backend", default="default", help="the TASKS entry")
        parser.add_argument("verb", help="a jobtrail verb: migrate, worker, explain, …")
        parser.add_argument("verb_args", nargs=argparse.REMAINDER, help="the verb's arguments")

    def run_from_argv(self, argv: list[str]) -> None:
        # manage.py: jobtrail's own parser sees every argument (its --help lists the verbs)
        try:
            code = self._run(_strip_django_options(argv[2:]))
        except CommandError as exc:  # one line, as Django's own run_from_argv prints it
            self.stderr.write(f"{type(exc).__name__}: {exc}")
            raise SystemExit(exc.returncode) from None
        if code:
            raise SystemExit(code)

    def handle(self, *_: Any, **options: Any) -> None:
        args = [str(options["verb"]), *map(str, options.get("verb_args") or [])]
        if "--backend" not in args and not any(a.startswith("--backend=") for a in args):
            args += ["--backend", str(options.get("backend") or "default")]
        with (
            contextlib.redirect_stdout(self.stdout._out),
            contextlib.redirect_stderr(self.stderr._out),
        ):
            code = self._run(args)
        if code:
            raise CommandError(f"jobtrail {args[0]} exited with status {code}", returncode=code)

    def _run(self, args: list[str]) -> int:
        """Run one jobtrail verb on the chosen backend; its exit status."""
        alias, args = _take_option(args, "--backend", "default")
        from ...backend import JobtrailBackend

        try:
            backend = task_backends[alias]
        except Exception as exc:
            raise CommandError(f"no task backend {alias!r} in TASKS: {exc}") from None
        if not isinstance(backend, JobtrailBackend):
            raise CommandError(
                f"TASKS[{alias!r}] is a {type(backend).__name__}, not "
                "jobtrail.contrib.django.JobtrailBackend"
            )
        verb = next((a for a in args if not a.startswith("-")), None)
        if verb is not None and verb not in _NO_SCHEMA_NEEDED and "--help" not in args:
            _require_schema(backend)
        if args and args[0] == "worker":
            args = ["worker", *_worker_args(backend, args[1:])]
            backend.discover()
        runtime.app = backend.app
        # for this call only: call_command runs in the caller's process (a test suite, a
        # deploy script), whose later jobtrail commands must not find the Django App named
        before = os.environ.get("JOBTRAIL_APP")
        os.environ["JOBTRAIL_APP"] = "jobtrail.contrib.django.runtime:app"
        try:
            cli.main(args)
        except SystemExit as exc:  # the CLI always ends so
            code = exc.code
            return code if isinstance(code, int) else (0 if code is None else 1)
        finally:
            if before is None:
                os.environ.pop("JOBTRAIL_APP", None)
            else:
                os.environ["JOBTRAIL_APP"] = before
            runtime.app = None
            backend.close()
        return 0  # pragma: no cover - cli.main always exits


def _require_schema(backend: Any) -> None:
    """``CommandError`` naming ``manage.py jobtrail migrate`` when the backend's store has no
    jobtrail schema (the CLI's own message names the plain ``jobtrail migrate --db``)."""
    try:
        backend.app.list(limit=1)
    except SchemaMissing as exc:
        raise CommandError(str(backend.schema_missing(exc))) from None


def _worker_args(backend: Any, args: list[str]) -> list[str]:
    queues, args = _take_option(args, "--queues", None)
    if "--queue" in args:
        return args
    chosen = queues.split(",") if queues else sorted(backend.queues)
    out: list[str] = []
    for q in chosen:
        if not q.strip():
            raise CommandError(f"--queues {queues!r}: a queue name is empty")
        out += ["--queue", q.strip()]
    return out + args


def _take_option(args: list[str], name: str, default: Any) -> tuple[Any, list[str]]:
    """``--name VALUE`` or ``--name=VALUE`` taken out of ``args``."""
    rest: list[str] = []
    value = default
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == name:
            if i + 1 >= len(args):
                raise CommandError(f"{name} needs a value")
            value = args[i + 1]
            i += 2
            continue
        if arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
        else:
            rest.append(arg)
        i += 1
    return value, rest


def _strip_django_options(args: list[str]) -> list[str]:
    """Django's own ``--settings``/``--pythonpath`` (already applied by manage.py)."""
    out: list[str] = []
    for name in _DJANGO_GLOBAL:
        _, args = _take_option(args, name, None)
    out.extend(args)
    return out
