"""The named statements of the driver seam beyond a task's moves: queues, cron, steps and
effects, the outbox, webhook deliveries, stats, the views for people, the invariant check and
pruning. One method per statement, named subject + verb; the rest of jobtrail calls these and
never names a query (``tests/unit/test_driver_seam.py``). ``Driver`` (``base.py``) inherits
them; a driver overrides one where its dialect needs another shape."""

from __future__ import annotations

from typing import Any

from .types import IdList, NameList, Row, Stamp, Tx


class Statements:
    """Mixed into ``Driver``: each method runs its statement from the dialect's ``sql/``."""

    dialect: str

    # -- queues: pause state, limits, history, held counts -------------------------------------
    def queue_get(self, tx: Tx, *, name: str) -> Row | None:
        """Queue ``name``'s row (pause, limits, rate), or None when never set; app/ops.py,
        app/rates.py, the cron scheduler."""
        return tx.one("queue_get", {"name": name})

    def queue_held_count(self, tx: Tx, *, queue: str) -> Row | None:
        """``n``: the tasks of ``queue`` leased now (cancel requests included); explain's
        "concurrency limit reached"."""
        return tx.one("queue_held_count", {"queue": queue})

    def queue_history_insert(
        self, tx: Tx, *, queue: str, action: str, actor: str, note: str, data: str
    ) -> int:
        """Append one audited queue action (pause, resume, limit, rate) with its actor and note;
        app/ops.py, app/rates.py."""
        return tx.run(
            "queue_history_insert",
            {"queue": queue, "action": action, "actor": actor, "note": note, "data": data},
        )

    def queue_history_list(self, tx: Tx, *, queue: str, limit: int) -> list[Row]:
        """The newest ``limit`` audited actions on ``queue``; App.queue_history."""
        return tx.all("queue_history_list", {"queue": queue, "limit": limit})

    def queue_list(self, tx: Tx) -> list[Row]:
        """Every queue that has a row (settings set at least once), by name; App.queues,
        App.workers."""
        return tx.all("queue_list")

    def queue_tenant_held(self, tx: Tx, *, queue: str, tenant: str) -> Row | None:
        """``n``: the tasks of ``queue`` and ``tenant`` leased now; explain's per-tenant "limit
        reached"."""
        return tx.one("queue_tenant_held", {"queue": queue, "tenant": tenant})

    def queue_upsert(
        self,
        tx: Tx,
        *,
        name: str,
        paused: bool,
        paused_by: str | None,
        paused_note: str | None,
        limit_total: int | None,
        limit_per_tenant: int | None,
    ) -> Row | None:
        """Write queue ``name``'s pause state and limits (inserted if new), returning the row;
        app/ops.py, app/rates.py."""
        return tx.one(
            "queue_upsert",
            {
                "name": name,
                "paused": paused,
                "paused_by": paused_by,
                "paused_note": paused_note,
                "limit_total": limit_total,
                "limit_per_tenant": limit_per_tenant,
            },
        )

    # -- queues: rates (token buckets, ramps) ---------------------------------------------------
    def queue_rate_set(
        self,
        tx: Tx,
        *,
        name: str,
        per_second: float | None,
        burst: int | None,
        per_tenant: float | None,
        ramp: float | None,
        until: float | None,
    ) -> Row | None:
        """Set or clear queue ``name``'s rate; its bucket starts over (full, or a tenth during a
        ramp); app/rates.py."""
        return tx.one(
            "queue_rate_set",
            {
                "name": name,
                "per_second": per_second,
                "burst": burst,
                "per_tenant": per_tenant,
                "ramp": ramp,
                "until": until,
            },
        )

    def queue_claims_between(self, tx: Tx, *, queue: str, since: Stamp, until: Stamp) -> Row | None:
        """The claims of ``queue`` between two times (a resume ramp's pace before the pause);
        app/rates.py."""
        return tx.one("queue_claims_between", {"queue": queue, "since": since, "until": until})

    def queue_due_count(self, tx: Tx, *, queue: str) -> Row | None:
        """``n``: the queued tasks of ``queue`` due now; app/rates.py (a resume's ramp)."""
        return tx.one("queue_due_count", {"queue": queue})

    def tenant_rate_list(self, tx: Tx, *, queue: str, since: Stamp) -> list[Row]:
        """The tenant buckets of ``queue`` touched since ``since`` (older ones are full again);
        app/rates.py."""
        return tx.all("tenant_rate_list", {"queue": queue, "since": since})

    # -- cron schedules and windows ------------------------------------------------------------
    def cron_schedule_get(self, tx: Tx, *, kind: str) -> Row | None:
        """The stored schedule of cron kind ``kind``, or None; the cron scheduler."""
        return tx.one("cron_schedule_get", {"kind": kind})

    def cron_schedule_upsert(self, tx: Tx, params: dict[str, Any]) -> int:
        """Store a kind's schedule; a changed expression or time zone starts afresh from now; the
        scheduler."""
        return tx.run("cron_schedule_upsert", params)

    def cron_schedules(self, tx: Tx) -> list[Row]:
        """Every stored cron schedule; App.schedules and the cron scheduler."""
        return tx.all("cron_schedules")

    def cron_window_insert(
        self,
        tx: Tx,
        *,
        kind: str,
        window_at: Stamp,
        state: str,
        reason: str | None,
        earlier_skipped: int,
    ) -> Row | None:
        """Record one cron window once: None when another scheduler recorded it first (the key
        decides); the scheduler."""
        return tx.one(
            "cron_window_insert",
            {
                "kind": kind,
                "window_at": window_at,
                "state": state,
                "reason": reason,
                "earlier_skipped": earlier_skipped,
            },
        )

    def cron_window_list(self, tx: Tx, *, kind: str, state: str | None, limit: int) -> list[Row]:
        """The newest ``limit`` windows of ``kind`` (``state``: only those); App.cron_windows, the
        dashboard's cron page."""
        return tx.all("cron_window_list", {"kind": kind, "state": state, "limit": limit})

    def cron_window_set_task(self, tx: Tx, *, kind: str, window_at: Stamp, task_id: int) -> int:
        """Note the task a recorded window enqueued; the cron scheduler, in the window's
        transaction."""
        return tx.run(
            "cron_window_set_task", {"kind": kind, "window_at": window_at, "task_id": task_id}
        )

    # -- steps ---------------------------------------------------------------------------------
    def step_list(self, tx: Tx, *, id: int) -> list[Row]:
        """A task's steps and effects; App.steps, explain, the dashboard, and ``ctx`` (what is
        already confirmed)."""
        return tx.all("step_list", {"id": id})

    def stats_suspended(self, tx: Tx) -> list[Row]:
        """``queue``, ``kind``, ``wait_kind`` and ``n``: the tasks whose durable handler is
        suspended (sleeping, waiting for an event or for its children), from their partial
        index; services/stats.py (stats, /metrics)."""
        return tx.all("stats_suspended")

    def step_list_recorded(self, tx: Tx, *, id: int) -> list[Row]:
        """A task's steps and effects in the order they were recorded; App.steps, and
        App.replay with ``from_step`` and its preview (what comes after the named step)."""
        return tx.all("step_list_recorded", {"id": id})

    def step_supersede(self, tx: Tx, *, id: int, name: str, replay_seq: int, position: int) -> int:
        """Copy the step ``name`` of task ``id`` as it is to the superseded steps, marked with
        the replay's ``replay_seq`` and its recorded ``position``; App.replay with
        ``from_step``, before ``step_forget`` in the same transaction."""
        return tx.run(
            "step_supersede",
            {"id": id, "name": name, "replay_seq": replay_seq, "position": position},
        )

    def step_forget(self, tx: Tx, *, id: int, name: str) -> int:
        """Delete the step ``name`` of task ``id`` (whatever its status) so that the handler
        runs it again; App.replay with ``from_step``, after ``step_supersede``."""
        return tx.run("step_forget", {"id": id, "name": name})

    def step_superseded_list(self, tx: Tx, *, id: int) -> list[Row]:
        """The steps replays forgot of task ``id``, oldest replay first; App.steps
        (``superseded=True``), explain."""
        return tx.all("step_superseded_list", {"id": id})

    # -- effects -------------------------------------------------------------------------------
    def effect_confirmed_count(self, tx: Tx, *, id: int) -> Row | None:
        """``n``: the task's confirmed effects; the worker's outcomes and App's reads (what a retry
        would repeat)."""
        return tx.one("effect_confirmed_count", {"id": id})

    def effect_forget(self, tx: Tx, *, id: int, name: str) -> int:
        """Delete an unconfirmed effect intent (its call proved nothing happened); ``ctx``."""
        return tx.run("effect_forget", {"id": id, "name": name})

    def effect_note_error(self, tx: Tx, *, id: int, name: str, error: str) -> int:
        """Keep the error of an effect's uncertain call on its intent row; ``ctx``."""
        return tx.run("effect_note_error", {"id": id, "name": name, "error": error})

    def effect_refuse(self, tx: Tx, *, id: int, name: str, error: str) -> int:
        """Mark an effect intent refused by its provider (the next attempt calls again); ``ctx``."""
        return tx.run("effect_refuse", {"id": id, "name": name, "error": error})

    # -- the outbox ----------------------------------------------------------------------------
    def outbox_claim(
        self, tx: Tx, *, limit: int, lock_seconds: float, any_topic: bool, topics: NameList
    ) -> list[Row]:
        """Lock up to ``limit`` due pending messages for ``lock_seconds`` (SKIP LOCKED), one attempt
        more each; the relay."""
        return tx.all(
            "outbox_claim",
            {
                "limit": limit,
                "lock_seconds": lock_seconds,
                "any_topic": any_topic,
                "topics": topics,
            },
        )

    def outbox_delivered(self, tx: Tx, *, id: int) -> int:
        """Mark a pending message delivered; the outbox relay."""
        return tx.run("outbox_delivered", {"id": id})

    def outbox_failed(self, tx: Tx, *, id: int, error: str, delay: float) -> int:
        """Put a pending message back ``delay`` s from now with its error; the outbox relay."""
        return tx.run("outbox_failed", {"id": id, "error": error, "delay": delay})

    def outbox_insert(self, tx: Tx, *, task_id: int, topic: str, payload: str) -> int:
        """Queue a message in the outbox, in the transaction that records the task's outcome;
        worker/outcomes.py."""
        return tx.run("outbox_insert", {"task_id": task_id, "topic": topic, "payload": payload})

    def outbox_list(self, tx: Tx, *, id: int) -> list[Row]:
        """A task's outbox messages; App.outbox and explain."""
        return tx.all("outbox_list", {"id": id})

    # -- webhook deliveries --------------------------------------------------------------------
    def webhook_delivery_get(self, tx: Tx, params: dict[str, Any]) -> Row | None:
        """A delivery seen before (by source and delivery id), or None; App.receive_webhook."""
        return tx.one("webhook_delivery_get", params)

    def webhook_delivery_insert(self, tx: Tx, params: dict[str, Any]) -> Row | None:
        """Record a delivery once: None when it was recorded before (the key decides);
        App.receive_webhook."""
        return tx.one("webhook_delivery_insert", params)

    def webhook_delivery_set_task(self, tx: Tx, params: dict[str, Any]) -> int:
        """Note the task a recorded delivery enqueued; App.receive_webhook."""
        return tx.run("webhook_delivery_set_task", params)

    # -- stats ---------------------------------------------------------------------------------
    def stats_dead(self, tx: Tx) -> list[Row]:
        """Undismissed dead tasks by queue and kind with the oldest finish; services/stats.py
        (App.stats)."""
        return tx.all("stats_dead")

    def stats_finished(self, tx: Tx, *, since: Stamp) -> list[Row]:
        """Tasks finished since ``since`` by queue, kind and state; services/stats.py."""
        return tx.all("stats_finished", {"since": since})

    def stats_open(self, tx: Tx) -> list[Row]:
        """Unfinished tasks by queue, kind and state with the oldest due, counted exactly;
        services/stats.py."""
        return tx.all("stats_open")

    def stats_open_bounded(self, tx: Tx, *, upto: int) -> list[Row]:
        """``stats_open``, each group's queued tasks counted up to ``upto``; services/stats.py."""
        return tx.all("stats_open_bounded", {"upto": upto})

    def stats_reasons(self, tx: Tx, *, since: Stamp) -> list[Row]:
        """Transitions by reason since ``since``; services/stats.py and App.transition_counts."""
        return tx.all("stats_reasons", {"since": since})

    def stats_runs(self, tx: Tx, *, since: Stamp) -> list[Row]:
        """Run time of the attempts that ended since ``since``; services/stats.py."""
        return tx.all("stats_runs", {"since": since})

    def stats_waits(self, tx: Tx, *, since: Stamp) -> list[Row]:
        """Queue wait (claim minus due) of the claims since ``since``; services/stats.py."""
        return tx.all("stats_waits", {"since": since})

    def stats_window_start(self, tx: Tx, *, since: Stamp, skip: int) -> Row | None:
        """Where a stats window must start to read at most ``skip`` transitions (None: fewer);
        services/stats.py."""
        return tx.one("stats_window_start", {"since": since, "skip": skip})

    # -- views for people ----------------------------------------------------------------------
    def view_activity(
        self, tx: Tx, *, since: Stamp, bucket: float, start: Stamp | None = None
    ) -> list[Row]:
        """Arrivals and completions per queue and time bucket since ``since``; App.activity (the
        dashboard's charts)."""
        return tx.all("view_activity", {"since": since, "bucket": bucket, "start": start})

    def view_counts_between(self, tx: Tx, *, after: Stamp, upto: Stamp) -> list[Row]:
        """Transitions in ``(after, upto]`` by queue, kind, reason and state (/metrics counters);
        app/views.py."""
        return tx.all("view_counts_between", {"after": after, "upto": upto})

    def view_runs_between(self, tx: Tx, *, after: Stamp, upto: Stamp) -> list[Row]:
        """Run times of the attempts that ended in ``(after, upto]`` (/metrics); app/views.py."""
        return tx.all("view_runs_between", {"after": after, "upto": upto})

    def view_waits_between(self, tx: Tx, *, after: Stamp, upto: Stamp) -> list[Row]:
        """Queue waits of the claims in ``(after, upto]`` (/metrics); app/views.py."""
        return tx.all("view_waits_between", {"after": after, "upto": upto})

    def view_dead_count(self, tx: Tx) -> Row | None:
        """``n``: the undismissed dead tasks, counted exactly; App.state_counts."""
        return tx.one("view_dead_count")

    def view_state_counts(self, tx: Tx) -> list[Row]:
        """Tasks per state, counted exactly; App.state_counts."""
        return tx.all("view_state_counts")

    def view_dead_count_upto(self, tx: Tx, *, upto: int) -> Row | None:
        """``view_dead_count`` counting up to ``upto`` at most; App.state_counts(upto=) (the
        dashboard's header)."""
        return tx.one("view_dead_count_upto", {"upto": upto})

    def view_state_counts_upto(self, tx: Tx, *, upto: int) -> list[Row]:
        """Tasks per state counted up to ``upto`` each (an index walk); App.state_counts(upto=)."""
        return tx.all("view_state_counts_upto", {"upto": upto})

    def view_task_by_key(self, tx: Tx, *, tenant: str, kind: str, key: str) -> list[Row]:
        """The task with this tenant, kind and idempotency key (a point lookup); App.find_by_key."""
        return tx.all("view_task_by_key", {"tenant": tenant, "kind": kind, "key": key})

    def view_tasks_by_ids(self, tx: Tx, *, ids: str) -> list[Row]:
        """The tasks of ``ids`` (a JSON array of ids); App.dead_preview."""
        return tx.all("view_tasks_by_ids", {"ids": ids})

    # -- the invariant check -------------------------------------------------------------------
    def check_parents(self, tx: Tx) -> list[Row]:
        """Every parent with its children's states, for the workflow rule; services/check.py."""
        return tx.all("check_parents")

    def check_read_only(self, tx: Tx) -> int:
        """Make the rest of ``tx`` refuse every write (the check only reads); services/check.py."""
        return tx.run("check_read_only")

    def check_transitions_page(
        self, tx: Tx, *, after_task: int, after_seq: int, limit: int
    ) -> list[Row]:
        """The transition log in pages by key, after ``(after_task, after_seq)``; services/check.py
        (the edge rule)."""
        return tx.all(
            "check_transitions_page",
            {"after_task": after_task, "after_seq": after_seq, "limit": limit},
        )

    # -- pruning -------------------------------------------------------------------------------
    def prune_outbox(self, tx: Tx, *, ids: IdList) -> int:
        """Delete the outbox messages of the pruned tasks ``ids``; services/retention.py."""
        return tx.run("prune_outbox", {"ids": ids})

    def prune_select(self, tx: Tx, *, older_than: float, limit: int) -> list[Row]:
        """Ids of finished tasks older than ``older_than`` s that nothing refers to, locked (SKIP
        LOCKED); the driver tests."""
        return tx.all("prune_select", {"older_than": older_than, "limit": limit})

    def prune_steps(self, tx: Tx, *, ids: IdList) -> int:
        """Delete the steps of the pruned tasks ``ids``; services/retention.py."""
        return tx.run("prune_steps", {"ids": ids})

    def prune_steps_superseded(self, tx: Tx, *, ids: IdList) -> int:
        """Delete the superseded steps (replay from a step) of the pruned tasks ``ids``;
        services/retention.py."""
        return tx.run("prune_steps_superseded", {"ids": ids})

    def prune_tasks(self, tx: Tx, *, ids: IdList) -> int:
        """Delete the task rows ``ids`` (their steps, outbox and log go first); the driver tests."""
        return tx.run("prune_tasks", {"ids": ids})

    def prune_transitions(self, tx: Tx, *, ids: IdList) -> int:
        """Delete the logs of the pruned tasks ``ids`` (inside ``prune_guard``), before their
        rows; services/retention.py. Counts the log table's rows and the enqueued transitions
        kept on the rows (0027), which go with the rows."""
        on_rows = tx.one("prune_enqueued_count", {"ids": ids})
        return tx.run("prune_transitions", {"ids": ids}) + int(on_rows["n"] if on_rows else 0)

    def id_mark(self, tx: Tx) -> None:
        """Record the highest task id handed out so far, with the time (PostgreSQL: the id marks
        through which the readers of a time window find the tasks created in it, 0027), unless
        a mark is under a minute old; drops the marks older than eight days."""
        tx.run("id_mark", {})

    # -- retention: bounded prune batches by state, and their counts ----------------------------
    def retention_select(self, tx: Tx, *, state: str, older_than: float, limit: int) -> list[Row]:
        # one statement per partial index: through the parameter alone no plan could use it
        """The oldest tasks of ``state`` past ``older_than`` s, locked (SKIP LOCKED) for one batch;
        services/retention.py."""
        name = "retention_select_dead" if state == "dead" else "retention_select"
        return tx.all(name, {"state": state, "older_than": older_than, "limit": limit})

    def retention_delete_tasks(self, tx: Tx, *, ids: IdList, state: str) -> int:
        """Delete the task rows ``ids`` that are still in ``state``; services/retention.py."""
        return tx.run("retention_delete_tasks", {"ids": ids, "state": state})

    def pruned_add(self, tx: Tx, *, state: str, tasks: int, transitions: int) -> int:
        """Add a batch to the running totals of pruned tasks and transitions per state;
        services/retention.py."""
        return tx.run("pruned_add", {"state": state, "tasks": tasks, "transitions": transitions})

    def pruned_list(self, tx: Tx) -> list[Row]:
        """The totals pruned so far per state; services/retention.py (``pruned_counts``)."""
        return tx.all("pruned_list")

    # -- tracing: the contexts stored with tasks at enqueue ---------------------------------
    def trace_contexts(self, tx: Tx, *, ids: IdList) -> list[Row]:
        """The trace context each of ``ids`` was enqueued with; the worker's handlers (a span's
        parent)."""
        return tx.all("trace_contexts", {"ids": ids})

    # -- tasks (reads and non-state writes) ----------------------------------------------------
    def task_by_receipt(
        self, tx: Tx, *, receipt_id: str, kind: str | None, tenant: str | None
    ) -> list[Row]:
        """Up to two tasks with this receipt id (awaiting first; ``tenant`` None: any);
        App.confirm_receipt."""
        return tx.all("task_by_receipt", {"receipt_id": receipt_id, "kind": kind, "tenant": tenant})

    def task_held_by(self, tx: Tx, *, owner: str, limit: int) -> list[Row]:
        """The tasks leased to ``owner`` as a claim returns them; the worker after a lost round trip
        (worker/handoff.py)."""
        return tx.all("task_held_by", {"owner": owner, "limit": limit})

    def task_holder(self, tx: Tx, *, id: int) -> Row | None:
        """A task's state, owner, attempt and whether its lease is valid; ``ctx`` and
        worker/outcomes.py."""
        return tx.one("task_holder", {"id": id})

    def task_lock(self, tx: Tx, *, id: int) -> Row | None:
        """Lock a parent's row so two finishing children see each other; core/workflow.py."""
        return tx.one("task_lock", {"id": id})

    def task_receipt_expired(self, tx: Tx, *, limit: int) -> list[Row]:
        """Up to ``limit`` tasks past their receipt deadline, locked (SKIP LOCKED);
        services/receipts.py."""
        return tx.all("task_receipt_expired", {"limit": limit})

    def task_set_after(self, tx: Tx, *, id: int, after_id: int) -> int:
        """Make ``id`` wait for ``after_id`` (sequential children); App's workflow enqueue
        (app/effects.py)."""
        return tx.run("task_set_after", {"id": id, "after_id": after_id})

    # -- workflow children ---------------------------------------------------------------------
    def children_list(self, tx: Tx, *, id: int) -> list[Row]:
        """A parent's children; workflows, explain, App's reads and the replayer."""
        return tx.all("children_list", {"id": id})

    # -- dead letters --------------------------------------------------------------------------
    def dead_groups(self, tx: Tx) -> list[Row]:
        """Undismissed dead tasks by reason and kind with the group's evidence; App.dead."""
        return tx.all("dead_groups")

    def dead_tasks_evidence(
        self, tx: Tx, *, reason: str | None, kind: str | None, per_group: int
    ) -> list[Row]:
        """The newest ``per_group`` dead tasks of each group with their own evidence;
        App.dead(tasks=)."""
        return tx.all(
            "dead_tasks_evidence", {"reason": reason, "kind": kind, "per_group": per_group}
        )

    def effect_list_for_tasks(self, tx: Tx, *, ids: str) -> list[Row]:
        """The effects of the tasks ``ids`` (confirmed ones a replay skips); App.dead,
        App.dead_preview."""
        return tx.all("effect_list_for_tasks", {"ids": ids})

    # -- live workers: heartbeat rows-------------, and what they are compared with -----------
    def worker_beat(
        self,
        tx: Tx,
        *,
        id: str,
        host: str,
        pid: int,
        version: str | None,
        queues: str,
        kinds: str,
        concurrency: int,
        stale_after: float,
    ) -> int:
        """A worker's heartbeat (``queues``/``kinds``: JSON arrays): its row inserted or its
        ``last_seen_at`` moved on; the rows of workers silent past their ``stale_after`` are
        deleted in the same transaction."""
        return tx.run(
            "worker_beat",
            {
                "id": id,
                "host": host,
                "pid": pid,
                "version": version,
                "queues": queues,
                "kinds": kinds,
                "concurrency": concurrency,
                "stale_after": stale_after,
            },
        )

    def worker_forget(self, tx: Tx, *, id: str) -> int:
        """Delete a stopping worker's heartbeat row; worker/presence.py."""
        return tx.run("worker_forget", {"id": id})

    def worker_list(self, tx: Tx) -> list[Row]:
        """The live workers oldest first (a row silent past its ``stale_after`` is not live);
        App.workers."""
        return tx.all("worker_list")

    def worker_held_tasks(self, tx: Tx) -> list[Row]:
        """The tasks leased now, with their owners; App.workers."""
        return tx.all("worker_held_tasks")

    def worker_due_groups(self, tx: Tx) -> list[Row]:
        """The due work by queue and kind; the driver tests (doctor runs the same SQL without a
        driver)."""
        return tx.all("worker_due_groups")

    # -- replay runs -----------------------------------------------------------------------------
    def replay_run_insert(
        self,
        tx: Tx,
        *,
        actor: str,
        note: str,
        data: str,
        batch_size: int | None,
        stop_after_failures: int | None,
        total: int,
        driver: str,
        detached: bool,
    ) -> Row | None:
        """Create a replay run driven by ``driver`` (its heartbeat starts now), returning its row;
        app/replays.py."""
        return tx.one(
            "replay_run_insert",
            {
                "actor": actor,
                "note": note,
                "data": data,
                "batch_size": batch_size,
                "stop_after_failures": stop_after_failures,
                "total": total,
                "driver": driver,
                "detached": detached,
            },
        )

    def replay_run_tasks_insert(self, tx: Tx, *, run_id: int, ids: str) -> int:
        """Store a run's tasks in replay order (``ids`` a JSON array); app/replays.py."""
        return tx.run("replay_run_tasks_insert", {"run_id": run_id, "ids": ids})

    def replay_run_task_mark(self, tx: Tx, *, run_id: int, position: int, seq: int) -> int:
        """Note the ``seq`` a run's task at ``position`` was replayed at; services/replayer.py."""
        return tx.run("replay_run_task_mark", {"run_id": run_id, "position": position, "seq": seq})

    def replay_run_progress(
        self, tx: Tx, *, id: int, driver: str, replayed: int, skipped: int, batches: int
    ) -> int:
        """Move a run on, only by its current driver while it runs (0 rows otherwise);
        services/replayer.py."""
        return tx.run(
            "replay_run_progress",
            {
                "id": id,
                "driver": driver,
                "replayed": replayed,
                "skipped": skipped,
                "batches": batches,
            },
        )

    def replay_run_beat(self, tx: Tx, *, id: int, driver: str) -> int:
        """The run's driver is alive (0 rows: it drives the run no more); services/replayer.py."""
        return tx.run("replay_run_beat", {"id": id, "driver": driver})

    def replay_run_take(self, tx: Tx, *, id: int, driver: str, stale: float) -> int:
        """A sweep takes a detached run's next step if nobody holds it or its holder went stale; the
        replayer."""
        return tx.run("replay_run_take", {"id": id, "driver": driver, "stale": stale})

    def replay_run_release(self, tx: Tx, *, id: int, driver: str) -> int:
        """End a detached run's step, so any process's next sweep may take the next; replays and the
        replayer."""
        return tx.run("replay_run_release", {"id": id, "driver": driver})

    def replay_run_get(self, tx: Tx, *, id: int) -> Row | None:
        """One run with its ages on the database clock, or None; services/replayer.py."""
        return tx.one("replay_run_get", {"id": id})

    def replay_run_due(self, tx: Tx, *, stale: float, limit: int) -> list[Row]:
        """The running runs a sweep must look at (unheld detached ones, stale attached ones); the
        replayer."""
        return tx.all("replay_run_due", {"stale": stale, "limit": limit})

    def replay_run_interrupt(self, tx: Tx, *, id: int, by: str, died: int, stale: float) -> int:
        """Stop an attached run whose driver went stale as ``interrupted`` (guarded);
        services/replayer.py."""
        return tx.run("replay_run_interrupt", {"id": id, "by": by, "died": died, "stale": stale})

    def replay_run_tasks_next(self, tx: Tx, *, run_id: int, after: int, limit: int) -> list[Row]:
        """A run's next ``limit`` tasks after position ``after``; services/replayer.py."""
        return tx.all("replay_run_tasks_next", {"run_id": run_id, "after": after, "limit": limit})

    def replay_run_observe(self, tx: Tx, *, id: int) -> Row | None:
        """How many of a run's replayed tasks died again and how many are on their way; the
        replayer."""
        return tx.one("replay_run_observe", {"id": id})

    def replay_run_finish(
        self, tx: Tx, *, id: int, driver: str, state: str, stop_code: str | None, died: int
    ) -> int:
        """Finish a running run as ``state``, only by its current driver; services/replayer.py."""
        return tx.run(
            "replay_run_finish",
            {"id": id, "driver": driver, "state": state, "stop_code": stop_code, "died": died},
        )

    def replay_run_list(self, tx: Tx, *, id: int | None, limit: int) -> list[Row]:
        """The newest ``limit`` runs (``id``: that one), how many died again; App.replay_runs."""
        return tx.all("replay_run_list", {"id": id, "limit": limit})

    def prune_guard(self, tx: Tx, *, on: bool) -> None:
        """Lift (``on``) or restore the transition log's delete guard for a prune batch (a
        function returning a row on PostgreSQL, a statement on SQLite)."""
        name = "prune_guard_on" if on else "prune_guard_off"
        if self.dialect == "postgres":
            tx.one(name)
        else:
            tx.run(name)

    # -- the invariant check's simple rules (check.py names them) ------------------------------
    def check_state_projection(self, tx: Tx) -> list[Row]:
        """Tasks whose state is not their last transition's ``to_state``; services/check.py."""
        return tx.all("check_state_projection")

    def check_seq_contiguous(self, tx: Tx) -> list[Row]:
        """Tasks whose log is not numbered 1..n with ``seq`` n; services/check.py."""
        return tx.all("check_seq_contiguous")

    def check_log_chain(self, tx: Tx) -> list[Row]:
        """Transitions that do not start where the one before ended; services/check.py."""
        return tx.all("check_log_chain")

    def check_terminal_finished(self, tx: Tx) -> list[Row]:
        """Succeeded, cancelled or dead tasks without ``finished_at``; services/check.py."""
        return tx.all("check_terminal_finished")

    def check_effect_keys(self, tx: Tx) -> list[Row]:
        """Confirmed effects that share a key; services/check.py."""
        return tx.all("check_effect_keys")

    def check_held_lease(self, tx: Tx) -> list[Row]:
        """Held tasks without an owner or an expiry; services/check.py."""
        return tx.all("check_held_lease")

    def check_queued_lease(self, tx: Tx) -> list[Row]:
        """Queued tasks that hold an unexpired lease; services/check.py."""
        return tx.all("check_queued_lease")

    def check_row_evidence(self, tx: Tx) -> list[Row]:
        """Tasks whose dead-letter evidence on the row contradicts their log; services/check.py."""
        return tx.all("check_row_evidence")

    # -- the handler context's holder-conditional writes (``None``: no longer held) -----------
    def effect_intent(self, tx: Tx, params: dict[str, Any]) -> Row | None:
        """Record an effect intent only while the caller holds the task (``None``: no longer held);
        ``ctx``. ``call_order``: its place among the handler's recorded calls (optional)."""
        return tx.one("effect_intent", {"call_order": None, **params})

    def step_confirm(self, tx: Tx, params: dict[str, Any]) -> Row | None:
        """Record a confirmed step or effect only while the caller holds the task (``None``: no
        longer held); ``ctx``. ``call_order``: its place among the handler's recorded calls
        (optional)."""
        return tx.one("step_confirm", {"call_order": None, **params})

    # -- concurrency keys (serial per key) -------------------------------------------------
    def task_set_key(self, tx: Tx, *, id: int, key: str, limit: int) -> None:
        """Give the task just inserted in ``tx`` its concurrency key and the limit of its kind;
        app/keys.py, with ``queue_mark_keyed`` in the same transaction."""
        tx.run("task_set_key", {"id": id, "key": key, "limit": limit})

    def queue_mark_keyed(self, tx: Tx, *, name: str) -> None:
        """Mark queue ``name`` keyed (inserted if new): its claims go through the limited claim,
        which takes keyed tasks by ``task_claim_keyed``; store/flow.py."""
        tx.run("queue_mark_keyed", {"name": name})

    def key_holders(self, tx: Tx, *, queue: str, tenant: str, key: str) -> list[Row]:
        """The tasks that hold ``key`` of (``queue``, ``tenant``) now (leased or
        cancel_requested), the oldest claim first; explain."""
        return tx.all("key_holders", {"queue": queue, "tenant": tenant, "key": key})

    def key_ahead_count(
        self, tx: Tx, *, queue: str, tenant: str, key: str, run_at: Stamp, id: int
    ) -> Row | None:
        """``n``: the queued tasks of the key due before the task at (``run_at``, ``id``);
        explain."""
        return tx.one(
            "key_ahead_count",
            {"queue": queue, "tenant": tenant, "key": key, "run_at": run_at, "id": id},
        )

    # -- rates per kind within a queue ----------------------------------------------------------
    def kind_rate_list(self, tx: Tx, *, queue: str | None) -> list[Row]:
        """The rates per kind of ``queue`` (``None``: of every queue) with their buckets;
        store/flow.py, app/rates.py."""
        return tx.all("kind_rate_list", {"queue": queue})

    def kind_rate_set(
        self, tx: Tx, *, queue: str, kind: str, per_second: float, burst: int | None
    ) -> Row | None:
        """Set the rate of ``kind`` within ``queue`` (its bucket starts full); App.set_rate."""
        return tx.one(
            "kind_rate_set",
            {"queue": queue, "kind": kind, "per_second": per_second, "burst": burst},
        )

    def kind_rate_delete(self, tx: Tx, *, queue: str, kind: str) -> None:
        """Lift the rate of ``kind`` within ``queue``; App.set_rate."""
        tx.run("kind_rate_delete", {"queue": queue, "kind": kind})

    def queue_kind_rated_sync(self, tx: Tx, *, name: str) -> None:
        """Mark queue ``name`` kind-rated while any of its kinds has a rate (its claims then
        go through the limited claim); App.set_rate."""
        tx.run("queue_kind_rated_sync", {"name": name})

    def kind_tokens_set(self, tx: Tx, *, queue: str, kind: str, tokens: float) -> None:
        """The tokens left in the bucket of ``kind`` within ``queue`` after a claim;
        store/flow.py."""
        tx.run("kind_tokens_set", {"queue": queue, "kind": kind, "tokens": tokens})
