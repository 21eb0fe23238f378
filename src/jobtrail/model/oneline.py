"""Text made safe for one log line: no log line begins with text a payload chose.

A log line that carries stored or user text — a handler's exception message, a kind, a note, a
webhook's event type — must stay one line: a newline in that text would start a line of the
log that the payload wrote, which a reader (or a log shipper) takes for the program's own.
``one_line`` escapes every control character (newline, carriage return and tab included), the
Unicode line and paragraph separators, the bidirectional overrides and lone surrogates;
``indented`` prefixes every line of a multi-line block (a traceback), so that no line of it
starts where a log line starts.
"""

from __future__ import annotations

import re

# C0 controls (newline, CR and tab too), DEL, C1 controls (NEL among them), the line and
# paragraph separators, the bidirectional overrides and isolates ("Trojan Source"), and lone
# surrogates (no encoding can write them)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: What ``indented`` puts before each line of a block.
INDENT = "    "


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str) -> str:
    """``text`` with every control character shown as its escape (a newline as ``\\x0a``)."""
    return _CONTROL.sub(_escape, text)


def indented(block: str, prefix: str = INDENT) -> str:
    """Every line of ``block`` (split on any line break) after ``prefix``, each line's own
    control characters escaped: a traceback whose last line is a hostile message stays
    inside the record it belongs to."""
    return "\n".join(prefix + one_line(line) for line in block.splitlines())
