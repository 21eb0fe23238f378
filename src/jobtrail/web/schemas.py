"""Request and response bodies of the JSON API (docs/http.md); Task JSON uses the field
names of ``jobtrail.Task``.

Request bodies are strict, so that HTTP accepts what ``App.enqueue`` accepts and nothing more:
integers are JSON integers (not ``true``, ``"5"`` or ``1e3``), numbers are not booleans or
strings, times are ISO 8601 with a time zone, and no text holds a NUL or a lone surrogate
(neither backend can store them). Each refusal is a 422 naming the field."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from ..model import validate
from ..model.timeparse import parse_time

MAX_PRIORITY = validate.MAX_PRIORITY
MAX_DELAY = 10 * 365 * 86400  # as App.enqueue


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> Any:
        # the payload is checked where every caller's is (payloads.encode), not here
        if info.field_name != "payload":
            validate.text(value, info.field_name or "value")
        return value


def _aware_time(value: str) -> str:
    parse_time(value, "run_at", zone_required=True)  # the one parser, naming the field
    return value


Time = Annotated[
    StrictStr, AfterValidator(_aware_time), Field(json_schema_extra={"format": "date-time"})
]


class EnqueueBody(Strict):
    kind: StrictStr = Field(min_length=1, max_length=255, examples=["send_email"])
    payload: Any = Field(default=None, examples=[{"to": "a@example.com"}])
    queue: StrictStr | None = Field(default=None, min_length=1, max_length=128)
    priority: StrictInt = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    delay: StrictFloat | None = Field(
        default=None, ge=0, le=MAX_DELAY, allow_inf_nan=False, description="seconds"
    )
    run_at: Time | None = Field(default=None, description="ISO 8601 with a time zone")
    tenant: StrictStr | None = Field(default=None, max_length=255)
    # the controls (model/controls.py checks their values, as for every caller)
    debounce_key: StrictStr | None = Field(
        default=None, description="fold enqueues into the queued task of this key"
    )
    debounce: StrictFloat | None = Field(
        default=None, allow_inf_nan=False, description="seconds to wait for another enqueue"
    )
    debounce_max: StrictFloat | None = Field(
        default=None, allow_inf_nan=False, description="seconds: the latest the task is put off"
    )
    unique_for: StrictFloat | None = Field(
        default=None, allow_inf_nan=False, description="seconds the Idempotency-Key stays unique"
    )
    unique_while: StrictStr | None = Field(
        default=None, description="'active': the Idempotency-Key is unique until the task ends"
    )
    expires_in: StrictFloat | None = Field(
        default=None, allow_inf_nan=False, description="seconds: still queued then, cancelled"
    )
    expires_at: StrictStr | None = Field(
        default=None, description="ISO 8601 with a time zone: still queued then, cancelled"
    )
    wait_for_disk: StrictBool = Field(
        default=True,
        description="false: the commit returns before it reaches the disk (a server crash may"
        " lose it; docs/guide.md)",
    )


class ActBody(Strict):
    by: StrictStr = Field(
        min_length=1, max_length=255, description="who does it (recorded)", examples=["alice"]
    )
    note: StrictStr | None = Field(
        default=None, max_length=validate.MAX_NOTE, description="why (recorded)", examples=["fixed"]
    )


class ReplayBody(ActBody):
    """A replay of one dead task; with ``from_step`` the handler resumes at that step (its
    recorded outcome and everything recorded after it are forgotten and run again)."""

    from_step: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="resume at this step (recorded name); the preview says what runs again",
        examples=["charge"],
    )


class ReplayEffectOut(BaseModel):
    name: str
    effect_key: str | None
    status: str
    attempt: int
    forgotten: bool = Field(description="a replay from a step forgets it: it runs again")
    confirmed_at: str | None = None
    provider_ids: list[str] | None = None


class ReplayEffectsOut(BaseModel):
    again: list[ReplayEffectOut] = Field(description="effects the replay would perform again")
    skip: list[ReplayEffectOut] = Field(description="confirmed effects it keeps")


class ReplayPreviewOut(BaseModel):
    """What ``POST /api/tasks/{id}/replay`` would do with the same ``from_step``."""

    task_id: str
    state: str
    replayable: bool = Field(description="the task is dead (replay refuses any other)")
    from_step: str | None
    forgotten: list[str] = Field(description="recorded names it forgets, in recorded order")
    effects: ReplayEffectsOut


class EventBody(Strict):
    """An event for the tasks waiting for it (``App.send_event``)."""

    key: StrictStr = Field(
        min_length=1, max_length=255, description="the event key", examples=["verified:42"]
    )
    payload: Any = Field(
        default=None, description="any JSON; the first payload for a key wins", examples=[{}]
    )
    tenant: StrictStr | None = Field(
        default=None,
        max_length=255,
        description="the tenant (default: the token's, else none); a tenant-bound token may "
        "name only its own",
    )


class EventOut(BaseModel):
    woken: int = Field(description="tasks moved waiting → queued (0 for a repeat)")


class ReceiptBody(Strict):
    ok: StrictBool
    category: StrictStr | None = Field(default=None, max_length=64)
    error: StrictStr | None = Field(default=None, max_length=10_000)


class WaitingFor(BaseModel):
    """``Task.waiting_for``: ``kind`` ``sleep`` (``name``, ``until``), ``event`` (``key``,
    ``deadline``) or ``children`` (``ids``, ``deadline``); times in ISO 8601, a deadline
    null for a wait without timeout."""

    kind: str = Field(examples=["event"])
    name: str | None = Field(default=None, description="the sleep's name")
    until: str | None = Field(default=None, description="the sleep's wake time")
    key: str | None = Field(default=None, description="the event key")
    ids: list[str] | None = Field(default=None, description="the children it joins")
    deadline: str | None = Field(default=None, description="when the wait times out")


class TaskOut(BaseModel):
    id: str
    kind: str
    queue: str
    tenant: str
    state: str
    payload: Any = None
    priority: int
    attempts: int
    max_attempts: int
    run_at: str | None = None
    lease_owner: str | None = None
    lease_expires_at: str | None = None
    last_reason: str | None = None
    last_error_category: str | None = None
    last_error: str | None = None
    replay_count: int
    receipt_id: str | None = None
    parent_id: str | None = None
    created_at: str
    updated_at: str
    finished_at: str | None = None
    idempotency_key: str | None = None
    receipt_deadline: str | None = None
    dismissed: bool = False
    created: bool = False
    steps: dict[str, Any] = Field(default_factory=dict)
    result: Any = Field(default=None, description="the handler's return value once succeeded")
    waiting_for: WaitingFor | None = Field(
        default=None,
        description="what its suspended handler waits for (a sleep, an event, its children); "
        "null when it is not suspended",
    )
    debounced: bool = Field(default=False, description="folded into the task of its debounce key")
    expires_at: str | None = None


class ResultOut(BaseModel):
    task_id: str
    state: str
    finished: bool = Field(description="false (status 202): not finished within the timeout")
    result: Any = Field(default=None, description="the return value of the succeeded task")
    poll_after: int = Field(description="seconds until another look may show progress")


class AcceptedTaskOut(TaskOut):
    poll_after: int = Field(
        description="seconds until a look at the task can show progress (also Retry-After): "
        "0 when it is finished, the time until it is due when delayed, else 1"
    )


class TaskList(BaseModel):
    tasks: list[TaskOut]
    next_before: str | None = Field(description="pass as ?before= for the next page")


class TransitionOut(BaseModel):
    seq: int
    from_state: str | None = None
    to_state: str
    reason: str
    error_category: str | None = None
    error: str | None = None
    actor: str
    attempt: int
    at: str
    note: str | None = None
    corrects: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    traceback: str | None = Field(
        default=None, description="a failed attempt's traceback (frames only, last 16 KiB)"
    )
    error_class: str | None = Field(
        default=None, description="the failed attempt's exception class, e.g. builtins.KeyError"
    )


class Explanation(BaseModel):
    task_id: str
    lang: str
    text: str


class CancelOut(BaseModel):
    task_id: str
    outcome: str
    state: str
    reason: str | None = None


class QueuesOut(BaseModel):
    stats: dict[str, Any]
    queues: list[dict[str, Any]]


class WebhookOut(BaseModel):
    task_id: str | None
    duplicate: bool
    event_key: str | None = Field(
        default=None, description="the event the source's event_key mapped the delivery to"
    )
    woken: int | None = Field(default=None, description="tasks that event woke (0: a repeat)")


class FieldError(BaseModel):
    field: str = Field(description="the field, e.g. priority or payload.items.0")
    # "in" is a Python keyword
    where: str = Field(alias="in", description="body, query, path or header")
    message: str = Field(description="what is wrong, naming the field")


class ErrorOut(BaseModel):
    """Every 4xx/5xx answer."""

    error: str = Field(description="what is wrong, naming the field")
    current_state: str | None = None
    task_id: str | None = None
    fields: list[FieldError] | None = Field(
        default=None, description="each field a request failed validation on (422)"
    )


# -- dead letters and replay runs ---------------------------------------------------------------
class DeadTaskOut(BaseModel):
    """One dead task's evidence; the payload is never included, only its hash."""

    id: str
    kind: str
    queue: str
    tenant: str
    reason: str
    category: str | None = Field(description="the final error category")
    error: str | None = Field(
        default=None, description="the final error's text: its first line, at most 160 characters"
    )
    attempts: int
    max_attempts: int
    replay_count: int
    version: str | None = Field(description="the code version of the last claim")
    input_ref: str = Field(description="key:<idempotency key>, else sha256:<payload hash>")
    idempotency_key: str | None
    payload_hash: str
    provider_ids: list[str] = Field(description="from its confirmed effects and its receipt")
    effects: list[dict[str, Any]]
    first_failure: str | None
    last_failure: str | None
    died_at: str | None


class DeadGroupOut(BaseModel):
    reason: str
    kind: str
    count: int
    oldest_age: float | None
    versions: list[str]
    categories: list[str]
    attempts: dict[str, int | None] = Field(description="min and max")
    first_failure: str | None
    last_failure: str | None
    last_error_category: str | None = Field(
        default=None, description="the error category of the group's newest dead task"
    )
    last_error: str | None = Field(
        default=None,
        description="the error text of the group's newest dead task: its first line, at most "
        "160 characters",
    )
    tasks: list[DeadTaskOut] = Field(description="the newest `tasks` of the group")


class DeadOut(BaseModel):
    groups: list[DeadGroupOut]


class ReplayRunBody(Strict):
    """A detached replay run (``App.start_replay_run``): the filters and stop conditions of
    ``replay_dead``; at least one filter, as the CLI asks."""

    by: StrictStr = Field(min_length=1, max_length=255, description="who does it (recorded)")
    note: StrictStr = Field(min_length=1, max_length=validate.MAX_NOTE, description="why")
    reason: StrictStr | None = Field(default=None, max_length=64, examples=["permanent_error"])
    kind: StrictStr | None = Field(default=None, max_length=255)
    since: StrictStr | None = Field(
        default=None, max_length=64, description="died at or after (ISO 8601, or 2h ago)"
    )
    until: StrictStr | None = Field(
        default=None, max_length=64, description="died before (ISO 8601, or 10m ago)"
    )
    limit: StrictInt | None = Field(default=None, ge=1, le=validate.MAX_BATCH)
    per_second: StrictFloat | StrictInt | None = Field(
        default=None, ge=validate.MIN_RATE, le=validate.MAX_RATE, allow_inf_nan=False
    )
    batch_size: StrictInt | None = Field(default=None, ge=1, le=validate.MAX_BATCH)
    stop_after_failures: StrictInt | None = Field(default=None, ge=1, le=validate.MAX_BATCH)
    batch_timeout: StrictFloat | StrictInt = Field(
        default=300.0, gt=0, le=validate.MAX_DURATION, allow_inf_nan=False, description="seconds"
    )


class ReplayRunOut(BaseModel):
    id: int
    by: str
    note: str
    filter: dict[str, Any]
    batch_size: int | None
    stop_after_failures: int | None
    total: int
    replayed: int
    skipped: int
    batches: int
    state: str = Field(description="running, completed or stopped")
    stop_code: str | None = Field(description="died_again, not_settled or interrupted")
    stop_reason: str | None
    died_again: int = Field(description="replayed tasks dead again when the run ended")
    died_now: int = Field(description="replayed tasks dead again now")
    started_at: str
    updated_at: str
    finished_at: str | None
    driver: str | None = Field(description="who drives (or last drove) the run")
    detached: bool = Field(description="driven by the workers' sweep, not by its caller")
    heartbeat_at: str | None = Field(description="its driver's last sign of life")
    stopped_by: str | None = Field(description="who ended it: its driver, or a sweeper")
    unattended_for: float | None = Field(
        default=None,
        description="a running detached run that no worker's sweep has taken a step of for "
        "10 s or more: the seconds since the last one (no worker running?); else null",
    )


class ReplayRunsOut(BaseModel):
    runs: list[ReplayRunOut]


class ReplayRunStarted(ReplayRunOut):
    touched: list[tuple[str, str]] = Field(
        description="(task id, new state) of the run's first step, taken by this request"
    )


class WorkerOut(BaseModel):
    """A live worker, from its heartbeat row."""

    id: str = Field(description="owner id host:pid:boot (the lease_owner of its tasks)")
    host: str
    pid: int
    version: str | None = Field(description="the code version its claims record")
    queues: list[str] = Field(description="the queues it claims from")
    kinds: list[str] = Field(description="the kinds it registers (has handlers for)")
    concurrency: int
    started_at: str
    last_seen_at: str = Field(description="its latest heartbeat (every few seconds)")
    tasks: list[str] = Field(
        description="ids of the tasks leased to it now (a tenant's token: its tenant's only)"
    )


class WorkersOut(BaseModel):
    workers: list[WorkerOut]
