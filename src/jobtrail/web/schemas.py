"""Request and response bodies of the JSON API (§15 "HTTP bodies"); Task JSON uses the §6.3
field names."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnqueueBody(Strict):
    kind: str = Field(min_length=1, max_length=255, examples=["send_email"])
    payload: Any = Field(default=None, examples=[{"to": "a@example.com"}])
    queue: str | None = Field(default=None, min_length=1, max_length=128)
    priority: int = Field(default=0, ge=-(2**31 - 1), le=2**31 - 1)
    delay: float | None = Field(default=None, ge=0, le=10 * 365 * 86400)
    run_at: str | None = Field(default=None, description="ISO 8601 with a time zone")
    tenant: str | None = Field(default=None, max_length=255)


class ActBody(Strict):
    by: str = Field(
        min_length=1, max_length=255, description="who does it (recorded)", examples=["alice"]
    )
    note: str | None = Field(
        default=None, max_length=10_000, description="why (recorded)", examples=["fixed"]
    )


class ReceiptBody(Strict):
    ok: bool
    category: str | None = Field(default=None, max_length=64)
    error: str | None = Field(default=None, max_length=10_000)


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


class ErrorOut(BaseModel):
    error: str
    current_state: str | None = None
    task_id: str | None = None
