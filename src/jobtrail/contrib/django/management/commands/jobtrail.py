"""``python manage.py jobtrail VERB …``: the jobtrail CLI's verbs on the Django project's task
backend (``--backend ALIAS``, default ``"default"``), with Django's settings.

``worker`` takes ``--queues Q,...`` (without it: the backend's ``QUEUES``), ``--concurrency N``
and ``--burst``, and first registers every task of the backend it can find."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ..... import cli
from ... import runtime
from ...compat import task_backends

_DJANGO_GLOBAL = ("--settings", "--pythonpath")


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "jobtrail's command line on this project's task backend: migrate, worker [--burst] "
        "[--queues Q,...] [--concurrency N], explain ID, status ID, list, cancel ID, … "
        "(--backend ALIAS picks the TASKS entry; `manage.py jobtrail --help` lists the verbs)"
    )

    def run_from_argv(self, argv: list[str]) -> None:
        args = _strip_django_options(argv[2:])
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
        if args and args[0] == "worker":
            args = ["worker", *_worker_args(backend, args[1:])]
            backend.discover()
        runtime.app = backend.app
        os.environ["JOBTRAIL_APP"] = "jobtrail.contrib.django.runtime:app"
        try:
            cli.main(args)
        finally:
            backend.close()
            runtime.app = None

    def handle(self, *args: Any, **options: Any) -> None:  # pragma: no cover - run_from_argv
        raise CommandError("run as `manage.py jobtrail VERB ...`")


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
