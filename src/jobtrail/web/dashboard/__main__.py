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
    import uvicorn

    from . import create_dashboard_app

    parser = argparse.ArgumentParser(prog="python -m jobtrail.dashboard")
    parser.add_argument("--app", default=os.environ.get("JOBTRAIL_APP"))
    parser.add_argument("--db", default=None, help="store URL when --app is not given")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("the dashboard alone has no tokens: it binds to loopback only")
    uvicorn.run(create_dashboard_app(load_app(args.app, args.db)), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
