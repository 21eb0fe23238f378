"""``jobtrail send-event``: the command line's side of ``ctx.wait_for_event`` (``App.send_event``).

Registered on the ``jobtrail`` group by importing this module (``cli/__init__.py`` does).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..model import i18n, validate
from .base import Fail, Runtime, lang_option, verb


@verb("send-event")
@click.argument("key")
@click.argument("payload_json", required=False, metavar="[PAYLOAD_JSON]")
@click.option("--tenant", default="", metavar="T", help="The tenant the event belongs to.")
@lang_option
def send_event(rt: Runtime, key: str, payload_json: str | None, tenant: str, lang: str) -> None:
    """Send the event KEY with PAYLOAD_JSON (a JSON document; `-` reads stdin): it is stored
    (the first payload for a key wins) and every task waiting for it is queued to resume.
    Prints how many tasks it woke (0 for a repeat)."""
    for name, value in (("KEY", key), ("--tenant", tenant)):
        validate.text(value, name)  # an undecodable byte of argv arrives as a lone surrogate
    payload: Any = None
    if payload_json is not None:
        text = sys.stdin.read() if payload_json == "-" else payload_json
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise Fail(f"PAYLOAD_JSON is not valid JSON: {exc}") from None
    woken = rt.app().send_event(key, payload, tenant=tenant)
    rt.emit(
        {"key": key, "tenant": tenant, "woken": woken},
        i18n.t("cli.event_sent", lang, key=key, n=woken),
    )
