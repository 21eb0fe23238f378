"""What a handler hands the store, and what a receipt's confirmation carries, refused or kept
alike on both backends. Before: a NUL in an exception's message, a step or topic
name, a receipt id or a return value was a PostgreSQL ``DataError`` (the failure itself not
recorded: ``OutcomeNotRecorded``, retried) and stored as it was by SQLite; a receipt timeout of
1e300 s stored a deadline SQLite could not read back (``app.get`` raised ``OverflowError``);
``retry_after=inf`` and ``ctx.extend(1e300)`` failed in the store instead of in the handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import jobtrail


def _raises(exc: BaseException) -> Callable[[Any, Any], Any]:
    def handler(ctx: Any, payload: Any) -> Any:
        raise exc

    return handler


def _charge_fails(effect_key: str) -> None:
    raise ValueError("card\x00declined")  # the outcome is unknown: noted on the effect


def _retry_in_forever(ctx: Any, payload: Any) -> None:
    raise jobtrail.TransientError("x", retry_after=1e300)  # the constructor refuses it


#: kind -> (handler, the state it ends in, its last reason, what its last error says)
HANDLERS: dict[str, tuple[Callable[[Any, Any], Any], str, str, str]] = {
    "error_nul": (
        _raises(ValueError("bad\x00thing")),
        "queued",
        "retry_scheduled",
        "ValueError: bad\\x00thing",
    ),
    "effect_error_nul": (
        lambda ctx, p: ctx.effect("charge", _charge_fails),
        "queued",
        "retry_scheduled",
        "ValueError: card\\x00declined",
    ),
    "retry_after_1e300": (
        _retry_in_forever,
        "queued",
        "retry_scheduled",
        "ValueError: retry_after must be a non-negative number of seconds, at most 100 years",
    ),
    "receipt_forever": (
        lambda ctx, p: ctx.await_receipt("r-1", 1e300),
        "queued",
        "retry_scheduled",
        "ValueError: the receipt timeout must be above 0 and at most 100 years",
    ),
    "receipt_id_nul": (
        lambda ctx, p: ctx.await_receipt("r\x00", 10),
        "queued",
        "retry_scheduled",
        "ValueError: the receipt id contains a NUL character",
    ),
    "extend_forever": (
        lambda ctx, p: ctx.extend(1e300),
        "queued",
        "retry_scheduled",
        "ValueError: extend() needs a positive number of seconds, at most 100 years",
    ),
    "step_nul": (
        lambda ctx, p: ctx.step("a\x00b", lambda: 1),
        "queued",
        "retry_scheduled",
        "ValueError: the step, effect or topic name 'a\\x00b' contains a NUL character",
    ),
    "topic_nul": (
        lambda ctx, p: ctx.emit("t\x00", {}),
        "queued",
        "retry_scheduled",
        "ValueError: the step, effect or topic name 't\\x00' contains a NUL character",
    ),
    "result_nul": (
        lambda ctx, p: {"text": "a\x00b"},
        "dead",
        "permanent_error",
        "a string holding a NUL character",
    ),
    "result_key_nul": (
        lambda ctx, p: {"a\x00": 1},
        "dead",
        "permanent_error",
        "a key: a string holding a NUL character",
    ),
    "result_surrogate": (
        lambda ctx, p: ["\ud800"],
        "dead",
        "permanent_error",
        "a string that is not valid Unicode",
    ),
}


def test_a_handlers_hostile_values_end_alike_and_stay_readable(app: jobtrail.App) -> None:
    for kind, (handler, *_) in HANDLERS.items():
        # full jitter draws the first retry's wait from 0 up to the base: a base of a day
        # keeps a retried task from coming due again within this burst run (60 s did not:
        # through PgBouncer under CI's load one ran its second attempt and died)
        app.task(kind, max_attempts=2, backoff_base=86_400, backoff_cap=86_400)(handler)
    ids = {kind: app.enqueue(kind).id for kind in HANDLERS}
    app.run_worker(burst=True, concurrency=2, poll_interval=0.05)
    for kind, (_, state, reason, says) in HANDLERS.items():
        task = app.get(ids[kind])  # readable: no time out of range, no undecodable text
        last = app.transitions(ids[kind])[-1]
        assert (task.state.value, last.reason) == (state, reason), (kind, last.error)
        assert last.error is not None and says in last.error, (kind, last.error)
        assert "OutcomeNotRecorded" not in last.error, kind  # the failure itself was recorded
        if state == "dead":
            assert last.error_category == "invalid_input", kind
    # the message and the traceback keep the NUL as an escape
    failed = app.transitions(ids["error_nul"])[-1]
    assert failed.traceback is not None and "bad\\x00thing" in failed.traceback
    assert "\x00" not in failed.traceback
    assert app.check() == []


def test_a_sinks_failure_with_a_nul_is_noted_alike(app: jobtrail.App) -> None:
    """The outbox relay notes a sink's failure on the message: a NUL in it is kept as an
    escape (PostgreSQL refused the note, so the relay itself failed)."""

    @app.sink("note")
    def refuse(message_id: Any, topic: str, payload: Any) -> None:
        raise ValueError("down\x00hard")

    @app.task("emits")
    def emits(ctx: Any, payload: Any) -> None:
        ctx.emit("note", {"n": 1})

    task = app.enqueue("emits")
    app.run_worker(burst=True)
    app.dispatch_outbox()
    [message] = app.outbox(task.id)
    assert message["last_error"] == "ValueError: down\\x00hard"


def test_a_return_value_with_the_six_characters_backslash_u0000_is_stored(
    app: jobtrail.App,
) -> None:
    """Only a real NUL is refused: the text ``\\u0000`` (a backslash and five characters) is
    ordinary text and is stored as it was returned."""

    @app.task("escaped")
    def escaped(ctx: Any, payload: Any) -> Any:
        return {"text": "\\u0000"}

    task = app.enqueue("escaped")
    app.run_worker(burst=True)
    assert app.result(task.id) == {"text": "\\u0000"}


@pytest.fixture()
def awaiting(app: jobtrail.App) -> jobtrail.Task:
    @app.task("submit")
    def submit(ctx: Any, payload: Any) -> None:
        ctx.await_receipt("r-1", 60)

    task = app.enqueue("submit")
    app.run_worker(burst=True)
    assert app.get(task.id).state.value == "awaiting_receipt"
    return task


@pytest.mark.parametrize(
    ("field", "call"),
    [
        ("receipt_id", lambda app, t: app.confirm_receipt(receipt_id="r\x00")),
        ("receipt_id", lambda app, t: app.confirm_receipt(receipt_id="r" * 1025)),
        ("kind", lambda app, t: app.confirm_receipt(receipt_id="r-1", kind="s\x00")),
        ("tenant", lambda app, t: app.confirm_receipt(receipt_id="r-1", tenant="a\ud800")),
        ("error", lambda app, t: app.confirm_receipt(t.id, ok=False, error="x\x00y")),
        ("error", lambda app, t: app.confirm_receipt(t.id, ok=False, error="x" * 10_001)),
        ("category", lambda app, t: app.confirm_receipt(t.id, ok=False, category="x" * 65)),
        ("by", lambda app, t: app.confirm_receipt(t.id, by="a\x00")),
        ("note", lambda app, t: app.confirm_receipt(t.id, note="n\x00")),
    ],
)
def test_a_confirmation_with_bad_text_is_refused_and_changes_nothing(
    app: jobtrail.App, awaiting: jobtrail.Task, field: str, call: Callable[..., Any]
) -> None:
    before = [t.to_dict() for t in app.transitions(awaiting.id)]
    with pytest.raises(ValueError, match=f"^{field} "):
        call(app, awaiting)
    assert [t.to_dict() for t in app.transitions(awaiting.id)] == before
    assert app.get(awaiting.id).state.value == "awaiting_receipt"
