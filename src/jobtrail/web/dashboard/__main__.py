"""``python -m jobtrail.dashboard --app module:attr [--db URL] [--host H] [--port N]``."""

from __future__ import annotations

import argparse
import importlib
import os

from ...app import App


def load_app(spec: str | None, db: str | None) -> App:
    if not spec:
        return App(db)
    module_name, _, attr = spec.partition(":")
    value = getattr(importlib.import_module(module_name), attr or "app")
    if not isinstance(value, App):
        raise SystemExit(f"{spec} is not a jobtrail.App")
    return value


def main(argv: list[str] | None = None) -> None:
    from ..connections import READ_TIMEOUT, default_max_connections
    from ..serving import run
    from . import create_dashboard_app

    parser = argparse.ArgumentParser(prog="python -m jobtrail.dashboard")
    parser.add_argument("--app", default=os.environ.get("JOBTRAIL_APP"))
    parser.add_argument("--db", default=None, help="store URL when --app is not given")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        help="a Host name to answer (repeatable); default 127.0.0.1, localhost and [::1] "
        "(env JOBTRAIL_ALLOWED_HOSTS)",
    )
    parser.add_argument("--read-timeout", type=float, default=READ_TIMEOUT)
    parser.add_argument("--max-connections", type=int, default=None)
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("the dashboard alone has no tokens: it binds to loopback only")
    try:
        web = create_dashboard_app(load_app(args.app, args.db), allowed_hosts=args.allowed_host)
    except ValueError as exc:
        parser.error(str(exc))
    run(
        web,
        host=args.host,
        port=args.port,
        read_timeout=args.read_timeout,
        max_connections=args.max_connections or default_max_connections(),
    )


if __name__ == "__main__":
    main()
