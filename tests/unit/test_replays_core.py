"""The pure pieces of replay runs (``jobtrail.core.replays``): when a run stops between
batches, which provider ids an effect's result names, how effects split for a preview."""

from __future__ import annotations

from datetime import UTC, datetime

from jobtrail.core import replays


def test_batches_split_in_order_and_one_batch_without_a_size() -> None:
    assert list(replays.batches([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]
    assert list(replays.batches([1, 2, 3], None)) == [[1, 2, 3]]
    assert list(replays.batches([], None)) == []


def test_a_run_stops_on_enough_deaths_even_while_others_run() -> None:
    kw = {"stop_after_failures": 3}
    assert replays.stop_code(died=3, still_open=5, timed_out=False, **kw) == "died_again"
    assert replays.settled(died=3, still_open=5, **kw)
    assert replays.stop_code(died=2, still_open=0, timed_out=False, **kw) is None
    assert replays.settled(died=2, still_open=0, **kw)
    assert not replays.settled(died=2, still_open=1, **kw)
    # waiting ran out with tasks still open: stop, whatever the failures
    assert replays.stop_code(died=2, still_open=1, timed_out=True, **kw) == "not_settled"
    assert replays.stop_code(died=0, still_open=1, stop_after_failures=None, timed_out=True) == (
        "not_settled"
    )
    assert replays.stop_code(died=9, still_open=0, stop_after_failures=None, timed_out=True) is None


def test_stop_reasons_in_both_languages() -> None:
    run = {"stop_code": "died_again", "died_again": 5, "replayed": 120, "batches": 6, "filter": {}}
    assert replays.stop_reason(run) == "5 of 120 replayed tasks died again"
    assert replays.stop_reason(run, "zh") == "已重放的 120 个任务中有 5 个再次死亡"
    late = {**run, "stop_code": "not_settled", "filter": {"batch_timeout": 300.0}}
    assert replays.stop_reason(late).startswith("batch 6 had not settled within 300 s")
    assert replays.stop_reason({**run, "stop_code": None}) is None
    assert replays.outcome({**run, "stop_code": None, "state": "completed"}, "zh") == "已完成"
    assert replays.filter_text({"kind": "k", "reason": None, "until": "T"}) == "kind=k until=T"
    assert replays.filter_text({}) == "-"


def test_provider_ids_from_an_effect_result() -> None:
    assert replays.provider_ids({"id": "ch_1", "post_id": "p"}) == ["ch_1"]
    assert replays.provider_ids({"provider_id": 42}) == ["42"]
    assert replays.provider_ids({"post_id": "p-1", "media_id": "m-2", "n": 1}) == ["m-2", "p-1"]
    assert replays.provider_ids({"id": True, "ok": "yes"}) == []
    assert replays.provider_ids(["id", "x"]) == [] and replays.provider_ids(None) == []


def test_effects_split_into_performed_again_and_skipped() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    rows = [
        {"task_id": 7, "name": "upload", "status": "confirmed", "effect_key": "7/upload",
         "result": {"id": "img-1"}, "attempt": 1, "confirmed_at": at},
        {"task_id": 7, "name": "submit", "status": "intent", "effect_key": "7/submit",
         "result": None, "attempt": 1, "confirmed_at": None},
    ]  # fmt: skip
    split = replays.split_effects(rows)
    assert [e["name"] for e in split["7"]["again"]] == ["submit"]
    [skip] = split["7"]["skip"]
    assert (skip["name"], skip["provider_ids"], skip["confirmed_at"]) == ("upload", ["img-1"], at)


def test_a_detached_step_replays_at_its_pace_and_at_most_a_second_s_worth() -> None:
    assert replays.step_budget(None, 0.0) == replays.STEP_MAX  # no rate: a bounded step
    assert replays.step_budget(None, None) == replays.STEP_MAX
    assert replays.step_budget(10, None) == 10  # the first step: one second's worth
    assert replays.step_budget(0.5, None) == 1
    assert replays.step_budget(10, 0.25) == 2  # what the rate allows since the last progress
    assert replays.step_budget(0.5, 1.0) == 0  # not yet
    assert replays.step_budget(0.5, 2.5) == 1
    assert replays.step_budget(10, 3600) == 10  # a batch that waited long does not go at once
    assert replays.step_budget(10_000, 3600) == replays.STEP_MAX
    assert replays.step_budget(10, -1.0) == 0  # clocks never go back, but if they did


def test_a_run_whose_driver_stopped_beating_says_so() -> None:
    beat = datetime(2026, 12, 1, 19, 0, 5, tzinfo=UTC)
    gone = {"stop_code": "interrupted", "driver": "caller@h:41/ab", "heartbeat_at": beat,
            "stopped_by": "sweeper@h:42/cd", "filter": {}}  # fmt: skip
    assert replays.stop_reason(gone) == (
        "its driver caller@h:41/ab stopped beating at 2026-12-01T19:00:05.000Z (killed?); "
        "the rest stay dead"
    )
    assert "停止心跳" in (replays.stop_reason(gone, "zh") or "")
    # stopped by itself (Ctrl-C): the plain interruption
    itself = {**gone, "stopped_by": gone["driver"]}
    plain = "the replaying process stopped mid-run; the rest stay dead"
    assert replays.stop_reason(itself) == plain
    assert replays.HEARTBEAT * 10 <= replays.STALE_AFTER  # a stale driver missed many beats
