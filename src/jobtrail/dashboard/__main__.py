"""``python -m jobtrail.dashboard``: the documented entry point of ``jobtrail.web.dashboard``.
On a base install (no ``jobtrail[server]`` extra) it says in one line which extra to install,
with the exit code ``jobtrail serve`` gives (``cli.base.EXIT_USAGE``)."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from ..web.dashboard.__main__ import main as run
    except ImportError as exc:
        from ..cli.base import EXIT_USAGE, missing_server_extra

        print(
            f"python -m jobtrail.dashboard: error: {missing_server_extra('the dashboard', exc)}",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)
    run()


if __name__ == "__main__":
    main()
