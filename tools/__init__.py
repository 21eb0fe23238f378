"""Developer tools run from a checkout (``python -m tools.docs``); not part of the wheel."""
