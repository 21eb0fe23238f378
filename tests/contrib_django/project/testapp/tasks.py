"""The tasks the integration tests enqueue."""

import os

from jobtrail.contrib.django import jobtrail_options
from jobtrail.contrib.django.compat import FRAMEWORK
from jobtrail.model.errors import PermanentError

if FRAMEWORK == "django.tasks":
    from django.tasks import task
else:
    from django_tasks import task


def _note(text: str) -> None:
    path = os.environ.get("JT_DJ_RECORD")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


@task
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="other")
def record(label: str) -> str:
    _note(label)
    return label


@task
async def add_async(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@task(takes_context=True)
def with_context(context, label: str) -> dict[str, object]:
    first = context.step("first", lambda: f"{label}-step")
    return {
        "attempt": context.attempt,
        "id": context.task_result.id,
        "step": first,
        "jobtrail_attempt": context.jobtrail.attempt,
    }


@task
def fail(message: str) -> None:
    raise KeyError(message)


@task
def fail_unclassified(message: str) -> None:
    # OPTIONS["TASKS"]: retry_unclassified False, so this KeyError ends the task at once
    raise KeyError(message)


@task
def fail_over_budget(message: str) -> None:
    # OPTIONS["TASKS"]: max_elapsed 1 ms, spent before the worker even starts
    raise KeyError(message)


@task
def fail_permanently(message: str) -> None:
    raise PermanentError(message)


@task
@jobtrail_options(max_attempts=1)
def returns_object() -> object:
    return object()


@task(takes_context=True)
def awaits_receipt(context, receipt: str) -> str:
    # the handler returns; the task waits in awaiting_receipt for the provider's receipt
    context.jobtrail.await_receipt(receipt, 300)
    return receipt


@task(takes_context=True)
def awaits_receipt_briefly(context, receipt: str) -> str:
    # a receipt deadline of 0.2 s: the next sweep after it ends the task (receipt_timeout)
    context.jobtrail.await_receipt(receipt, 0.2)
    return receipt


@task(queue_name="hang")
@jobtrail_options(max_attempts=1, lease_seconds=1)
def hangs(path: str) -> None:
    # says that it started, then holds its slot while PATH.hold exists (at most 60 s): the
    # test kills its worker meanwhile
    import time

    with open(path, "w") as f:
        f.write(str(os.getpid()))
    limit = time.monotonic() + 60
    while os.path.exists(path + ".hold") and time.monotonic() < limit:
        time.sleep(0.05)


@task
@jobtrail_options(max_attempts=1)
def exits(code: int) -> None:
    # a BaseException that is not an Exception: the task fails, and is finished
    raise SystemExit(code)


@task(takes_context=True)
@jobtrail_options(max_attempts=1)  # a suspension is not a failure, even on the last attempt
def sleeps(context) -> str:
    # a durable handler's sleep: queued until the wake time, no worker held
    context.jobtrail.sleep("nap", 3600)
    return "woke"


@task(takes_context=True)
@jobtrail_options(max_attempts=1)
def waits_for_event(context, key: str) -> object:
    # a durable handler's wait: waiting until the event is sent
    return context.jobtrail.wait_for_event(key)
