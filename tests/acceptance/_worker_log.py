"""What a CLI's stderr may hold: a traceback only inside a worker's record of a failed attempt
(logged with its traceback, each line indented), never a crash of the CLI
itself."""

from __future__ import annotations

import re

#: The head of one log record of the CLI's text format (``cli/format.log_to_stderr``).
RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")
FAILED_ATTEMPT = re.compile(r"^\S+ \S+ (WARNING|ERROR) jobtrail\.worker: task .+ failed: ")


def stray_traceback(err: str) -> bool:
    """True when ``err`` has a traceback that is not part of a failed attempt's record."""
    allowed = False
    for line in err.splitlines():
        if RECORD.match(line):
            allowed = bool(FAILED_ATTEMPT.match(line))
        elif line.lstrip().startswith("Traceback") and not allowed:
            return True
    return False
