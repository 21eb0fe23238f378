"""jobtrail in a FastAPI app: enqueue inside the request's own async transaction, a worker in
the lifespan, the result fetched by the client.

    JOBTRAIL_DATABASE_URL=postgresql://localhost/mydb uvicorn app:api
    curl -X POST localhost:8000/signups -H 'content-type: application/json' \
         -d '{"email": "ann@example.com"}'
    curl localhost:8000/signups/1

On PostgreSQL the route writes its own ``signups`` row and the welcome task in one
transaction of a ``psycopg.AsyncConnection``: both exist or neither does (an email ending in
``@invalid`` is refused after the enqueue, and the rollback takes the task with it). On SQLite
the route does a plain ``aenqueue``. See README.md.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

import jobtrail

DATABASE_URL = os.environ.get("JOBTRAIL_DATABASE_URL", "sqlite:///fastapi_example.db")
POSTGRES = DATABASE_URL.startswith(("postgresql:", "postgres:"))

jobs = jobtrail.App(DATABASE_URL)


@dataclasses.dataclass
class Welcome:
    """The task's payload: checked when enqueued, rebuilt for the handler."""

    email: str
    name: str = ""


@jobs.task(max_attempts=3)
async def send_welcome(ctx: jobtrail.Context, payload: Welcome) -> None:
    async def render() -> str:
        return f"Welcome, {payload.name or payload.email}!"

    async def deliver(key: str) -> dict[str, str]:
        # a real mail API gets ``key`` as its idempotency key
        return {"message_id": f"msg-{key}"}

    await ctx.astep("text", render)
    await ctx.aeffect("mail", deliver)


class SignupIn(BaseModel):
    email: str
    name: str = ""


# the application's own connections (PostgreSQL): the route's transaction runs on one
pool: AsyncConnectionPool | None = None


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    global pool
    jobs.migrate()
    if POSTGRES:
        pool = AsyncConnectionPool(DATABASE_URL, min_size=1, open=False)
        await pool.open()
        async with pool.connection() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS signups (email TEXT PRIMARY KEY, task_id TEXT)"
            )
    worker = jobs.start_worker(concurrency=4, poll_interval=0.2)
    try:
        yield
    finally:
        await worker.astop(grace=10)  # as SIGTERM: running handlers get 10 s
        if pool is not None:
            await pool.close()
        await jobs.aclose()


api = FastAPI(lifespan=lifespan)


@api.post("/signups", status_code=201)
async def signup(body: SignupIn) -> dict[str, Any]:
    try:
        return await _signup(body)
    except jobtrail.IdempotencyConflict:
        raise HTTPException(409, "this address signed up with other details") from None


async def _signup(body: SignupIn) -> dict[str, Any]:
    welcome = Welcome(email=body.email, name=body.name)
    if pool is None:  # SQLite: a plain aenqueue, off the event loop
        task = await send_welcome.aenqueue(welcome, idempotency_key=body.email)
        return {"task_id": task.id, "created": task.created}
    async with pool.connection() as conn, conn.transaction():
        task = await send_welcome.aenqueue(welcome, idempotency_key=body.email, connection=conn)
        await conn.execute(
            "INSERT INTO signups (email, task_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (body.email, task.id),
        )
        if body.email.endswith("@invalid"):
            # refused after the enqueue: leaving the block rolls back the row and the task
            raise HTTPException(422, "that address cannot receive mail")
    return {"task_id": task.id, "created": task.created}


@api.get("/signups/{task_id}")
async def signup_status(task_id: str) -> dict[str, Any]:
    try:
        task = await jobs.aget(task_id)
    except jobtrail.TaskNotFound:
        raise HTTPException(404, f"no task {task_id}") from None
    return {
        "task_id": task.id,
        "state": task.state.value,
        "result": task.steps if task.state == "succeeded" else None,
        "explain": await jobs.aexplain(task.id) if task.state == "dead" else None,
    }
