"""``aenqueue`` and ``aget_result``: with ``OPTIONS["DATABASE_URL"]`` they go through jobtrail's
async API; with the tables in Django's database they keep the framework's way (a call on
Django's thread-sensitive executor, where the caller's ``atomic()`` block is open).

Django runs every sync ORM call from async code on one thread-sensitive executor; these tests
hold that thread busy (``held``) and check that the native paths finish anyway, and that an
enqueue into Django's own database still joins the transaction open on that thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
from asgiref.sync import sync_to_async

from .conftest import SEPARATE, signals, work

T = TypeVar("T")


def backends():  # noqa: ANN201 - the framework's objects are untyped
    from jobtrail.contrib.django.compat import task_backends

    return task_backends


@asynccontextmanager
async def held() -> AsyncIterator[None]:
    """Django's thread-sensitive executor kept busy until the block ends: anything queued on it
    meanwhile (``sync_to_async(..., thread_sensitive=True)``) waits for the block."""
    release = threading.Event()
    running = threading.Event()

    def hold() -> None:
        running.set()
        release.wait(60)

    blocker = asyncio.ensure_future(sync_to_async(hold, thread_sensitive=True)())
    await asyncio.to_thread(running.wait, 10)
    try:
        yield
    finally:
        release.set()
        await blocker


async def promptly(call: Awaitable[T]) -> T:
    """The call's result, or a failure saying it waited for the held executor."""
    try:
        return await asyncio.wait_for(call, 10)
    except TimeoutError:
        pytest.fail("the call waited for Django's thread-sensitive executor")


@pytest.fixture(params=SEPARATE)
def separate(request: pytest.FixtureRequest, django_env: dict[str, str]) -> str:
    return str(request.param)


def test_aget_result_reads_in_the_transaction_open_on_djangos_thread(alias: str) -> None:
    """With the tables in Django's database, ``aget_result`` takes the framework's way (on
    Django's thread-sensitive executor, as ``aenqueue``): inside an ``atomic()`` block opened
    there it reads on that block's connection, so it finds the task the block enqueued (it
    exists nowhere else before the commit). It used to read through jobtrail's async API on
    connections of its own: ``TaskResultDoesNotExist`` there, and a pool per event loop that
    kept sessions open after ``close()`` (the test database could not be dropped)."""
    from django.db import transaction
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import SUCCESSFUL, TaskResultStatus

    task = add.using(backend=alias)

    async def go() -> tuple[Any, Any]:
        atomic = transaction.atomic(using=alias)
        await sync_to_async(atomic.__enter__, thread_sensitive=True)()
        try:
            result = await task.aenqueue(2, 2)
            fetched = await promptly(task.aget_result(result.id))
        finally:
            await sync_to_async(atomic.__exit__, thread_sensitive=True)(None, None, None)
        return result, fetched

    result, fetched = asyncio.run(go())
    assert fetched == result and fetched.status == TaskResultStatus.READY
    work(alias)
    done = asyncio.run(task.aget_result(result.id))
    assert done.status == SUCCESSFUL and done.return_value == 4


def test_aenqueue_with_database_url_writes_without_djangos_thread(
    separate: str, django_env: dict[str, str]
) -> None:
    """The write is jobtrail's own (no Django transaction to join): the task is stored while
    the executor is held. ``task_enqueued`` then goes out by the framework's ``asend``, whose
    sync receivers (Django's own logger among them) run on that executor, as Django wants."""
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import SUCCESSFUL, TaskResultStatus

    task = add.using(backend=separate)
    app = backends()[separate].app
    newest = app.list(kind="testapp.tasks.add", limit=1)

    async def stored() -> Any:
        deadline = asyncio.get_running_loop().time() + 10
        while asyncio.get_running_loop().time() < deadline:
            found = await app.alist(kind="testapp.tasks.add", limit=1)
            if found != newest:
                return found[0]
            await asyncio.sleep(0.02)
        pytest.fail("the enqueue waited for Django's thread-sensitive executor")

    async def go() -> tuple[Any, Any]:
        async with held():
            pending = asyncio.ensure_future(task.aenqueue(3, b=4))
            row = await stored()
            assert not pending.done()  # its signal waits for the executor, as Django's do
        return row, await pending

    row, result = asyncio.run(go())
    assert result.id == row.id and row.payload == {"args": [3], "kwargs": {"b": 4}}
    assert result.status == TaskResultStatus.READY and result.kwargs == {"b": 4}
    # committed on its own and announced at once, from this process
    assert [s["signal"] for s in signals(django_env, separate, result.id)] == ["enqueued"]
    work(separate)
    assert task.get_result(result.id).status == SUCCESSFUL
    assert task.get_result(result.id).return_value == 7


def test_aenqueue_refuses_bad_input_and_writes_nothing(separate: str) -> None:
    from testapp.tasks import add

    backend = backends()[separate]
    before = backend.app.list(limit=1)
    with pytest.raises(TypeError, match="Unsupported type"):  # as the framework says
        asyncio.run(add.using(backend=separate).aenqueue(object(), 1))
    assert backend.app.list(limit=1) == before


def test_aenqueue_joins_the_transaction_open_on_djangos_thread(
    alias: str, django_env: dict[str, str]
) -> None:
    """An ``atomic()`` block entered from async code lives on Django's thread-sensitive
    executor (as in an async test of Django's ``TestCase``): the enqueue is part of it."""
    from django.db import transaction
    from testapp.models import Note
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import SUCCESSFUL, TaskResultDoesNotExist

    task = add.using(backend=alias)

    class Boom(Exception):
        pass

    async def in_atomic(*, commit: bool) -> Any:
        block = transaction.atomic(using=alias)
        await sync_to_async(block.__enter__, thread_sensitive=True)()
        try:
            await sync_to_async(Note.objects.using(alias).create, thread_sensitive=True)(
                text=f"async {commit}"
            )
            result = await task.aenqueue(1, 2)
        finally:
            error = None if commit else Boom()
            await sync_to_async(block.__exit__, thread_sensitive=True)(
                type(error) if error else None, error, None
            )
        return result

    lost = asyncio.run(in_atomic(commit=False))
    with pytest.raises(TaskResultDoesNotExist):
        task.get_result(lost.id)
    assert signals(django_env, alias, lost.id) == []  # no task_enqueued for a rollback
    assert not Note.objects.using(alias).filter(text="async False").exists()

    kept = asyncio.run(in_atomic(commit=True))
    assert Note.objects.using(alias).filter(text="async True").exists()
    assert [s["signal"] for s in signals(django_env, alias, kept.id)] == ["enqueued"]
    work(alias)
    assert task.get_result(kept.id).status == SUCCESSFUL
