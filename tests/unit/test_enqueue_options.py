"""``EnqueueOptions`` (model/enqueue_options.py) is the one list of ``enqueue``'s options: a
new option added there must reach every way of enqueueing, or be left out of one on purpose
(with the reason below). Fails when the HTTP body, the CLI verb, the signatures ``help()`` and
IDEs show, or ``DEFAULTS`` drift from it."""

from __future__ import annotations

import inspect
from typing import Any

import click
import pytest

import jobtrail
from jobtrail.app.handles import TaskHandle
from jobtrail.cli import cli
from jobtrail.model.enqueue_options import DEFAULTS, ITEM_KEYS, NAMES, EnqueueOptions
from jobtrail.web.schemas import EnqueueBody

#: Options POST /api/tasks takes outside its JSON body, or not at all, and why.
HTTP_ELSEWHERE = {
    "idempotency_key": "the Idempotency-Key header",
    "max_attempts": "not over HTTP: the kind's setting",
    "parent": "not over HTTP: a workflow's children are made by enqueue_workflow",
}

#: The CLI's name for an option whose flag is not the option's own name.
CLI_NAMES = {"key": "idempotency_key"}

#: Options `jobtrail enqueue` does not take, and why.
CLI_WITHOUT = {
    "parent": "a workflow's children are made by enqueue_workflow",
    "wait_for_disk": "a process per enqueue: its start costs far more than the flush it skips",
}


def test_every_option_has_a_default_and_a_type() -> None:
    assert set(DEFAULTS) == set(NAMES) == set(EnqueueOptions.__annotations__)
    assert ITEM_KEYS == {"kind", "payload", *NAMES}


def test_the_http_body_takes_every_option() -> None:
    body = set(EnqueueBody.model_fields) - {"kind", "payload"}
    assert body.isdisjoint(HTTP_ELSEWHERE), sorted(body & set(HTTP_ELSEWHERE))
    assert body | set(HTTP_ELSEWHERE) == set(NAMES), "EnqueueBody vs EnqueueOptions"


def test_the_cli_verb_takes_every_option() -> None:
    command = cli.commands["enqueue"]
    assert isinstance(command, click.Command)
    options = {
        CLI_NAMES.get(p.name, p.name)
        for p in command.params
        if isinstance(p, click.Option) and p.name is not None
    }
    taken = options & set(NAMES)
    assert taken.isdisjoint(CLI_WITHOUT), sorted(taken & set(CLI_WITHOUT))
    assert taken | set(CLI_WITHOUT) == set(NAMES), "jobtrail enqueue vs EnqueueOptions"


@pytest.mark.parametrize(
    "method",
    [
        jobtrail.App.enqueue,
        jobtrail.App.aenqueue,
        TaskHandle.enqueue,
        TaskHandle.aenqueue,
        TaskHandle.enqueue_many,
        TaskHandle.aenqueue_many,
    ],
    ids=lambda m: m.__qualname__,
)
def test_the_signature_names_every_option_with_its_default(method: Any) -> None:
    """What ``help()``, IPython and docs tools show (type checkers read the ``Unpack``)."""
    params = inspect.signature(method).parameters
    shown = {name: p.default for name, p in params.items() if p.kind is p.KEYWORD_ONLY}
    assert shown == {**DEFAULTS, "connection": None}
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert str(params["run_at"].annotation) == "datetime | str | None"
