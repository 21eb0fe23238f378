"""``jobtrail doctor``: is the store fit to run jobtrail? The checks are
``store/probe.py``'s; this verb prints them (a line each, or ``--json``) and exits 0 when all
is well, 1 otherwise (``EXIT_CODES``).

Registered on the ``jobtrail`` group by importing this module (``cli/__init__.py`` does).
"""

from __future__ import annotations

import os

import click

from ..model import i18n
from ..model.urls import describe_url
from ..store import probe
from .base import DEFAULT_URL, EXIT_OK, EXIT_REFUSED, Runtime, lang_option, load_app, verb

#: Status marks for people: aligned, readable without colour.
_MARK = {probe.OK: "✓", probe.WARN: "!", probe.FAIL: "✗", probe.NA: "-"}
_STATUS = {
    probe.OK: "doctor.ok",
    probe.WARN: "doctor.warn",
    probe.FAIL: "doctor.fail",
    probe.NA: "doctor.n/a",
}
_NAME = {
    "reachable": "doctor.c_reachable",
    "schema": "doctor.c_schema",
    "listen/notify": "doctor.c_listen/notify",
    "wake-up": "doctor.c_wake-up",
    "clock": "doctor.c_clock",
    "pooler": "doctor.c_pooler",
    "file": "doctor.c_file",
    "directory": "doctor.c_directory",
    "journal": "doctor.c_journal",
    "synchronous": "doctor.c_synchronous",
    "workers": "doctor.c_workers",
}


@verb("doctor")
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 60.0),
    default=5.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for the database to answer.",
)
@lang_option
def doctor(rt: Runtime, timeout: float, lang: str) -> int:
    """Check the store: reachable (with the server's own answer), schema version, wake-ups
    (LISTEN/NOTIFY), clock difference, a pooler in between; on SQLite also the file, its
    directory, WAL and synchronous; and that every due task has a live worker that takes it
    (its queue served, its kind registered). Exit 0 when all is well, 1 otherwise. Read-only."""
    url = rt.db
    if url is None and rt.app_ref:
        url = load_app(rt.app_ref).url
    url = url or os.environ.get("JOBTRAIL_DATABASE_URL") or DEFAULT_URL
    listen_url = rt.listen_url or os.environ.get("JOBTRAIL_LISTEN_URL")
    if listen_url is None and rt.app_ref:
        listen_url = load_app(rt.app_ref).listen_url
    checks = probe.diagnose(url, timeout=timeout, listen_url=listen_url)
    healthy = probe.healthy(checks)
    problems = sum(1 for c in checks if c.status not in (probe.OK, probe.NA))
    if rt.as_json:
        rt.emit(
            {"db": describe_url(url), "ok": healthy, "checks": [c.to_dict() for c in checks]}, ""
        )
    else:
        names = [i18n.t(_NAME[c.name], lang) for c in checks]
        marks = [i18n.t(_STATUS[c.status], lang) for c in checks]
        width = max(i18n.display_width(n) for n in names)
        mark_width = max(i18n.display_width(m) for m in marks)
        lines = [i18n.t("doctor.head", lang, db=describe_url(url))]
        for c, name, status in zip(checks, names, marks, strict=True):
            lines.append(
                f"  {_MARK[c.status]} {i18n.ljust(name, width)}  "
                f"{i18n.ljust(status, mark_width)}  {c.detail}"
            )
        lines.append(
            i18n.t("doctor.all_well", lang)
            if healthy
            else i18n.t("doctor.problems", lang, n=problems)
        )
        rt.emit(None, "\n".join(lines))
    return EXIT_OK if healthy else EXIT_REFUSED
