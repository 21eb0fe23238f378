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
