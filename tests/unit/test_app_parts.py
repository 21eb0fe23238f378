"""``App`` is a facade over parts (docs/architecture.md, "The parts of ``App``"): it inherits
nothing, and each public method is forwarded to the one part that owns it, whose own function
is what ``help()`` and ``inspect.signature`` see on the class."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

import jobtrail
from jobtrail.app.forward import forward
from jobtrail.worker import Worker
from jobtrail.worker.state import WorkerState

#: What ``App`` does itself: build the parts, hold the settings, open and close the store.
OWN = {"migrate", "close", "db_now", "kinds", "version"}
SETTINGS = {"url", "default_queue", "max_payload_bytes", "result_limit", "retention"}


def test_app_and_the_worker_inherit_no_concern() -> None:
    assert jobtrail.App.__mro__ == (jobtrail.App, object)
    assert Worker.__mro__ == (Worker, WorkerState, object)


def test_each_public_method_is_forwarded_to_the_part_that_owns_it() -> None:
    owners: dict[str, str] = {}
    for name, member in vars(jobtrail.App).items():
        if name.startswith("_") or name in OWN or name in SETTINGS | {"poll_interval"}:
            continue
        assert isinstance(member, forward), f"App.{name} is not forwarded to a part"
        fn = getattr(jobtrail.App, name)
        part, _, method = fn.__qualname__.partition(".")
        assert method == name, name
        assert fn.__module__.startswith("jobtrail.app."), name
        owners[name] = part
    assert owners["enqueue"] == "Enqueue"
    assert owners["cancel"] == "Actions"
    assert owners["aenqueue"] == "Async"
    assert len(owners) > 60


def test_on_the_class_a_forward_is_the_parts_function() -> None:
    from jobtrail.app.actions import Actions
    from jobtrail.app.enqueue import Enqueue

    assert jobtrail.App.cancel is Actions.cancel
    assert jobtrail.App.enqueue is Enqueue.enqueue
    assert "idempotency_key" in inspect.signature(jobtrail.App.enqueue).parameters


def test_on_an_instance_it_is_the_parts_bound_method(tmp_path: Path) -> None:
    with jobtrail.App(f"sqlite:///{tmp_path / 'a.db'}") as made:
        app: Any = made
        assert app.cancel.__self__ is app._actions
        assert app.cancel is app.cancel  # looked up once, then kept on the instance

        def replaced(*args: object, **kwargs: object) -> None:
            return None

        app.cancel = replaced
        assert app.cancel is replaced


def test_a_forward_must_carry_the_name_of_what_it_forwards() -> None:
    from jobtrail.app.reads import Reads

    with pytest.raises(Exception) as raised:  # noqa: B017 - Python 3.11 wraps it in RuntimeError

        class Wrong:
            fetch = forward("_reads", Reads.get)

        del Wrong
    error: BaseException | None = raised.value
    while error is not None and not isinstance(error, TypeError):
        error = error.__cause__
    assert error is not None and "name them alike" in str(error)


def test_rebound_carries_the_registrations_onto_its_own_store(tmp_path: Path) -> None:
    """The CLI's ``--db``: the loaded app's kinds, schedules, webhook sources, sinks, settings
    and the caller's own attributes, on a new App whose parts all use the new driver."""
    from jobtrail.app.facade import rebound

    loaded: Any = jobtrail.App(
        f"sqlite:///{tmp_path / 'a.db'}", result_limit=1000, retention={"succeeded": 5}
    )

    @loaded.task()
    def k(ctx: Any, payload: Any) -> None:
        return None

    @loaded.periodic("* * * * *")
    def tick(ctx: Any, payload: Any) -> None:
        return None

    @loaded.webhook("gh", tenant="t1")
    def gh(ctx: Any, event: Any) -> None:
        return None

    loaded.sink("topic")(lambda *args: None)
    loaded.demo_gate = "caller's own"
    assert loaded.enqueue  # a forward looked up (kept on the loaded instance) is not carried
    app: Any = rebound(loaded, f"sqlite:///{tmp_path / 'b.db'}", pooler=None, listen_url=None)
    try:
        assert app.kinds == loaded.kinds == ["k", "tick", "webhook.gh"]
        assert (app.result_limit, app.retention["succeeded"]) == (1000, 5.0)
        assert list(app._periodic) == ["tick"]
        assert app._webhooks._webhook_tenants == {"gh": "t1"}
        assert list(app._core._sinks) == ["topic"]
        assert app.demo_gate == "caller's own"
        assert app._driver is not loaded._driver
        for part in ("_enqueue", "_reads", "_workers", "_cron", "_async"):
            assert getattr(app, part)._driver is app._driver, part
        assert app.enqueue.__self__ is app._enqueue
        app.migrate()
        assert app.enqueue("k").created
        assert app.run_worker(burst=True) == 1
    finally:
        app.close()
        loaded.close()
