"""The ``jobtrail`` command line. ``base.py`` defines the group and what every verb shares;
importing the verb modules here registers them (they import ``base``, never this package), so
``jobtrail.cli:main`` (the console script) and ``jobtrail.cli.cli`` see every verb."""

from . import (  # noqa: F401  (registers the verbs)
    commands,
    dashboard,
    doctor,
    events,
    ops,
    replays,
    serve,
    workers,
)
from .base import (
    EXIT_CODES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STORE,
    EXIT_USAGE,
    Fail,
    Runtime,
    cli,
    load_app,
    main,
    verb,
)

__all__ = [
    "EXIT_CODES",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_STORE",
    "EXIT_USAGE",
    "Fail",
    "Runtime",
    "cli",
    "load_app",
    "main",
    "verb",
]
