"""The user-facing strings of the dashboard, the CLI's text output and the demo, in every
language (issue 17, item 6): one catalog, looked up by key with format arguments.

``t(key, lang, **args)`` is the one look-up. A key missing from the catalog, or a language
missing from an entry, raises ``KeyError`` — never a silent fallback to English; the tests
check that every entry has every language with the same ``{placeholders}`` and that every key
the code and the templates use exists. The explain narratives keep their own tables in
``explain.py`` (they were translated first); this catalog holds everything around them.

This module imports nothing else of jobtrail, so any layer may use it. ``pick`` chooses a
language for a web request from a ``?lang=`` value, the ``lang`` cookie and
``Accept-Language``; ``display_width`` measures text as a terminal shows it (a CJK character
takes two columns), so translated table headers still line up.
"""

from __future__ import annotations

import os
import re
import unicodedata

LANGUAGES = ("en", "zh")
DEFAULT = "en"
ENV = "JOBTRAIL_LANG"
COOKIE = "lang"
COOKIE_MAX_AGE = 365 * 86400

MESSAGES: dict[str, dict[str, str]] = {
    # -- dashboard: navigation and shared words ----------------------------------------------
    "nav.tasks": {"en": "Tasks", "zh": "任务"},
    "nav.queues": {"en": "Queues", "zh": "队列"},
    "nav.dead": {"en": "Dead letters", "zh": "死信"},
    "nav.cron": {"en": "Cron", "zh": "定时"},
    "nav.workers": {"en": "Workers", "zh": "工作器"},
    "nav.sign_out": {"en": "Sign out", "zh": "退出登录"},
    "nav.language": {"en": "Language", "zh": "语言"},
    "lang.en": {"en": "English", "zh": "English"},
    "lang.zh": {"en": "中文", "zh": "中文"},
    "form.operator": {"en": "operator", "zh": "操作人"},
    "form.why": {"en": "why", "zh": "原因"},
    "col.id": {"en": "id", "zh": "编号"},
    "col.kind": {"en": "kind", "zh": "类型"},
    "col.queue": {"en": "queue", "zh": "队列"},
    "col.tenant": {"en": "tenant", "zh": "租户"},
    "col.state": {"en": "state", "zh": "状态"},
    "col.reason": {"en": "reason", "zh": "原因"},
    "col.attempts": {"en": "attempts", "zh": "尝试"},
    "col.attempt": {"en": "attempt", "zh": "第几次"},
    "col.updated": {"en": "updated", "zh": "更新于"},
    "col.task": {"en": "task", "zh": "任务"},
    "col.window": {"en": "window", "zh": "窗口"},
    "col.count": {"en": "count", "zh": "数量"},
    "col.oldest": {"en": "oldest", "zh": "最早"},
    "col.error": {"en": "error", "zh": "错误"},
    "col.at": {"en": "at", "zh": "时间"},
    "col.actor": {"en": "actor", "zh": "操作者"},
    # -- tasks page --------------------------------------------------------------------------
    "tasks.title": {"en": "Tasks", "zh": "任务"},
    "tasks.any_state": {"en": "any state", "zh": "任意状态"},
    "tasks.any_queue": {"en": "any queue", "zh": "任意队列"},
    "tasks.ph_kind": {"en": "kind", "zh": "类型"},
    "tasks.ph_queue": {"en": "queue", "zh": "队列"},
    "tasks.ph_tenant": {"en": "tenant", "zh": "租户"},
    "tasks.filter": {"en": "Filter", "zh": "筛选"},
    "tasks.clear": {"en": "clear", "zh": "清除"},
    "tasks.none": {"en": "No tasks match.", "zh": "没有匹配的任务。"},
    "tasks.newest": {"en": "« newest", "zh": "« 最新"},
    "tasks.older": {"en": "older »", "zh": "更早 »"},
    "tasks.footer": {
        "en": "Newest first, {n} shown. Key search is exact, across tenants and kinds unless "
        "a tenant or kind is chosen.",
        "zh": "最新的在前，显示 {n} 个。按键查找要求完全一致，除非选定租户或类型，否则跨所有租户"
        "和类型。",
    },
    # -- one task ----------------------------------------------------------------------------
    "task.title": {"en": "Task {id}", "zh": "任务 {id}"},
    "task.outcome": {"en": "Outcome:", "zh": "结果："},
    "task.why": {"en": "Why it is not running now", "zh": "为什么现在没有运行"},
    "task.kind": {"en": "kind", "zh": "类型"},
    "task.queue": {"en": "queue", "zh": "队列"},
    "task.tenant": {"en": "tenant", "zh": "租户"},
    "task.state": {"en": "state", "zh": "状态"},
    "task.attempts": {"en": "attempts", "zh": "尝试次数"},
    "task.replays": {"en": "replays {n}", "zh": "重放 {n} 次"},
    "task.last_error": {"en": "last error", "zh": "最近错误"},
    "task.idempotency_key": {"en": "idempotency key", "zh": "幂等键"},
    "task.lease": {"en": "lease", "zh": "租约"},
    "task.until": {"en": "until", "zh": "直到"},
    "task.receipt": {"en": "receipt", "zh": "回执"},
    "task.deadline": {"en": "deadline", "zh": "截止"},
    "task.run_at": {"en": "run at", "zh": "计划运行"},
    "task.created_updated": {"en": "created / updated", "zh": "创建 / 更新"},
    "task.parent": {"en": "parent", "zh": "父任务"},
    "task.more_facts": {"en": "more facts (as", "zh": "更多事实（与"},
    "task.more_facts_end": {"en": "prints them)", "zh": "的输出相同）"},
    "task.cancel": {"en": "Cancel", "zh": "取消"},
    "task.cancel_btn": {"en": "Cancel task", "zh": "取消任务"},
    "task.replay": {"en": "Replay", "zh": "重放"},
    "task.replay_btn": {"en": "Replay task", "zh": "重放任务"},
    "task.timeline": {"en": "Timeline", "zh": "经过"},
    "task.steps": {"en": "Steps and effects", "zh": "步骤与副作用"},
    "task.col_name": {"en": "name", "zh": "名称"},
    "task.col_type": {"en": "type", "zh": "类别"},
    "task.col_status": {"en": "status", "zh": "状态"},
    "task.col_effect_key": {"en": "effect key", "zh": "副作用键"},
    "task.col_result": {"en": "result / receipt", "zh": "结果 / 回执"},
    "task.col_confirmed": {"en": "confirmed", "zh": "确认于"},
    "task.effect": {"en": "effect", "zh": "副作用"},
    "task.step": {"en": "step", "zh": "步骤"},
    "task.intent": {"en": "(started, outcome unknown)", "zh": "（已开始，结果未知）"},
    "task.refused": {"en": "(refused, nothing happened)", "zh": "（被拒绝，未发生任何事）"},
    "task.outbox": {"en": "Outbox", "zh": "发件箱"},
    "task.col_topic": {"en": "topic", "zh": "主题"},
    "task.col_delivered": {"en": "delivered", "zh": "送达于"},
    "task.delivering": {"en": "delivering", "zh": "投递中"},
    "task.children": {"en": "Workflow children", "zh": "工作流子任务"},
    "task.payload": {"en": "Payload", "zh": "载荷"},
    "task.result": {"en": "Result", "zh": "结果"},
    "task.raised_at": {"en": "raised at", "zh": "出错位置"},
    "task.traceback": {"en": "traceback", "zh": "调用栈"},
    "task.payload_show": {"en": "show (first {n} characters)", "zh": "显示（前 {n} 个字符）"},
    # -- live workers ------------------------------------------------------------------------
    "workers.title": {"en": "Live workers", "zh": "存活的工作器"},
    "workers.note": {
        "en": "Each running worker beats every few seconds; a stopped one leaves this list, one "
        "that died is forgotten a minute after its last heartbeat. Tasks: those leased to it now.",
        "zh": "运行中的工作器每隔几秒发出一次心跳；停止的工作器会离开此列表，意外退出的工作器在"
        "最后一次心跳一分钟后被遗忘。任务：当前租给它的任务。",
    },
    "workers.col_id": {"en": "worker", "zh": "工作器"},
    "workers.col_host": {"en": "host", "zh": "主机"},
    "workers.col_pid": {"en": "pid", "zh": "进程号"},
    "workers.col_version": {"en": "version", "zh": "版本"},
    "workers.col_queues": {"en": "queues", "zh": "队列"},
    "workers.col_kinds": {"en": "kinds", "zh": "类型"},
    "workers.col_concurrency": {"en": "concurrency", "zh": "并发"},
    "workers.col_started": {"en": "started", "zh": "启动于"},
    "workers.col_last_seen": {"en": "last seen", "zh": "最近心跳"},
    "workers.col_tasks": {"en": "tasks", "zh": "任务"},
    "workers.none": {
        "en": "No live workers: due tasks wait until one starts.",
        "zh": "没有存活的工作器：到期的任务要等到有工作器启动才会运行。",
    },
    # -- queues ------------------------------------------------------------------------------
    "queues.title": {"en": "Queues", "zh": "队列"},
    # a text with markup is for the dashboard only: its arguments are escaped there
    "queues.outcome_paused": {
        "en": "Queue <b>{queue}</b> paused.",
        "zh": "队列 <b>{queue}</b> 已暂停。",
    },
    "queues.outcome_resumed": {
        "en": "Queue <b>{queue}</b> resumed.",
        "zh": "队列 <b>{queue}</b> 已恢复。",
    },
    "queues.col_status": {"en": "status", "zh": "状态"},
    "queues.col_limits": {"en": "limits", "zh": "限额"},
    "queues.col_activity": {
        "en": "last hour (bars: arrivals, line: completions, per 5 min)",
        "zh": "最近一小时（柱：到达，线：完成，每 5 分钟）",
    },
    "queues.col_pause": {"en": "pause / resume", "zh": "暂停 / 恢复"},
    "queues.paused": {"en": "paused", "zh": "已暂停"},
    "queues.paused_by": {"en": "by {by} since", "zh": "操作人 {by}，始于"},
    "queues.running": {"en": "running", "zh": "运行中"},
    "queues.limits": {
        "en": "total {total}, per tenant {per_tenant}",
        "zh": "总计 {total}，每租户 {per_tenant}",
    },
    "queues.activity_capped": {
        "en": "the activity charts read the newest {n} transitions only: complete from {since}",
        "zh": "活动图只读取最新的 {n} 条状态变更：自 {since} 起完整",
    },
    "queues.totals": {
        "en": "{arrived} arrived, {finished} finished",
        "zh": "到达 {arrived}，完成 {finished}",
    },
    "queues.no_activity": {"en": "no activity", "zh": "无活动"},
    "queues.pause": {"en": "Pause", "zh": "暂停"},
    "queues.resume": {"en": "Resume", "zh": "恢复"},
    "queues.health": {"en": "Health by queue and kind", "zh": "按队列和类型的健康状况"},
    "queues.health_note": {
        "en": "(rates per minute over the last {minutes} min, at {at})",
        "zh": "（最近 {minutes} 分钟内每分钟的速率，截至 {at}）",
    },
    "queues.window": {"en": "Window:", "zh": "时间窗："},
    "queues.minutes": {"en": "{n} min", "zh": "{n} 分钟"},
    "queues.window_note": {
        "en": "(a longer window reads more transitions)",
        "zh": "（时间窗越长，读取的转换越多）",
    },
    "queues.col_queued": {"en": "queued", "zh": "排队"},
    "queues.col_leased": {"en": "leased", "zh": "执行中"},
    "queues.col_waiting": {"en": "waiting / receipt", "zh": "等待 / 回执"},
    "queues.col_oldest_due": {"en": "oldest due", "zh": "最久到期"},
    "queues.col_rates": {"en": "in / out per min", "zh": "每分钟进 / 出"},
    "queues.col_retries": {"en": "retries", "zh": "重试"},
    "queues.col_expiries": {"en": "lease expiries", "zh": "租约过期"},
    "queues.col_dead": {"en": "dead (oldest)", "zh": "死信（最早）"},
    "queues.col_wait": {"en": "wait p50/p95", "zh": "等待 p50/p95"},
    "queues.col_run": {"en": "run p50/p95", "zh": "运行 p50/p95"},
    "queues.col_drain": {"en": "drain", "zh": "清空用时"},
    "queues.none": {"en": "No tasks.", "zh": "没有任务。"},
    # -- dead letters ------------------------------------------------------------------------
    "dead.title": {"en": "Dead letters", "zh": "死信"},
    "dead.col_versions": {"en": "code versions", "zh": "代码版本"},
    "dead.tasks": {"en": "tasks", "zh": "任务"},
    "dead.none": {"en": "No dead task needs a person.", "zh": "没有需要人工处理的死信任务。"},
    "dead.batch": {"en": "Batch replay", "zh": "批量重放"},
    "dead.any_reason": {"en": "any reason", "zh": "任意原因"},
    "dead.ph_kind": {"en": "kind", "zh": "类型"},
    "dead.ph_since": {"en": "since (ISO or 2h)", "zh": "起始（ISO 或 2h）"},
    "dead.ph_until": {"en": "until (ISO or 10m)", "zh": "截止（ISO 或 10m）"},
    "dead.preview": {"en": "Preview", "zh": "预览"},
    "preview.count": {"en": "dead task(s) will be replayed", "zh": "个死信任务将被重放"},
    "preview.truncated": {
        "en": "(the first {n}; replay again for the rest)",
        "zh": "（前 {n} 个；其余的请再次重放）",
    },
    "preview.each": {"en": ", each with its own", "zh": "，每个都有自己的"},
    "preview.transition": {
        "en": "transition. Tasks that die after this preview are not touched.",
        "zh": "转换。此预览之后才死亡的任务不受影响。",
    },
    "preview.confirm": {"en": "Confirm batch replay", "zh": "确认批量重放"},
    "preview.at_most": {"en": "at most", "zh": "每秒最多"},
    "preview.per_second": {"en": "per second", "zh": "个"},
    "preview.batch_size": {"en": "in batches of", "zh": "每批"},
    "preview.stop_after": {"en": "stop after", "zh": "在"},
    "preview.died_again": {"en": "died again", "zh": "个再次死亡后停止"},
    "preview.batch_timeout": {"en": "batch timeout", "zh": "每批超时"},
    "preview.button": {"en": "Replay these {n}", "zh": "重放这 {n} 个"},
    "preview.none": {
        "en": "No dead task matches these filters.",
        "zh": "没有符合这些条件的死信任务。",
    },
    "replayed.title": {"en": "Batch replay", "zh": "批量重放"},
    "replayed.heading": {"en": "Batch replay done", "zh": "批量重放完成"},
    "replayed.outcome": {"en": "{n} task(s) touched by {by}:", "zh": "{by} 处理了 {n} 个任务："},
    "replayed.heading_running": {"en": "Batch replay started", "zh": "批量重放已开始"},
    "replayed.run": {
        "en": "Replay run {id}: {replayed} of {total} replayed, {batches} batch(es) done.",
        "zh": "重放批次 {id}：已重放 {replayed} / {total} 个，已完成 {batches} 批。",
    },
    "replayed.goes_on": {
        "en": "The workers replay the rest batch by batch, with the same pace and stop "
        "conditions; its progress is listed on the dead-letter page.",
        "zh": "其余任务由 worker 按同样的速率和停止条件逐批重放；进度见死信页面。",
    },
    "replayed.col_new_state": {"en": "new state", "zh": "新状态"},
    "replayed.back": {"en": "Back to dead letters", "zh": "返回死信"},
    # -- replay runs, effects in the preview, dead-letter evidence ----------------------------
    "replay_run.died_again": {
        "en": "{died} of {replayed} replayed tasks died again",
        "zh": "已重放的 {replayed} 个任务中有 {died} 个再次死亡",
    },
    "replay_run.not_settled": {
        "en": "batch {batch} had not settled within {timeout} s (is a worker running?); "
        "the rest stay dead",
        "zh": "第 {batch} 批任务在 {timeout} 秒内未结束（是否有 worker 在运行？）；"
        "其余任务仍为死信",
    },
    "replay_run.interrupted": {
        "en": "the replaying process stopped mid-run; the rest stay dead",
        "zh": "执行重放的进程中途停止；其余任务仍为死信",
    },
    "replay_run.abandoned": {
        "en": "its driver {driver} stopped beating at {at} (killed?); the rest stay dead",
        "zh": "驱动它的进程 {driver} 于 {at} 停止心跳（被终止？）；其余任务仍为死信",
    },
    "replay_run.unattended": {
        "en": "running, but no worker has taken a step for {seconds} s: the workers' sweep "
        "carries it on (start one: jobtrail worker)",
        "zh": "进行中，但已有 {seconds} 秒没有 worker 推进它：由 worker 的巡检继续执行"
        "（请启动 worker：jobtrail worker）",
    },
    "replay_run.state.running": {"en": "running", "zh": "进行中"},
    "replay_run.state.completed": {"en": "completed", "zh": "已完成"},
    "replay_run.state.stopped": {"en": "stopped", "zh": "已停止"},
    "runs.title": {"en": "Replay runs", "zh": "重放批次"},
    "runs.none": {"en": "No replay run yet.", "zh": "还没有重放批次。"},
    "runs.col_run": {"en": "run", "zh": "批次"},
    "runs.col_by": {"en": "by", "zh": "操作人"},
    "runs.col_note": {"en": "note", "zh": "备注"},
    "runs.col_filter": {"en": "filter", "zh": "筛选"},
    "runs.col_progress": {"en": "replayed / total", "zh": "已重放 / 总数"},
    "runs.col_died": {"en": "died again", "zh": "再次死亡"},
    "runs.col_batches": {"en": "batches", "zh": "批数"},
    "runs.col_driver": {"en": "driven by", "zh": "驱动者"},
    "runs.by_workers": {"en": "the workers", "zh": "worker"},
    "runs.col_outcome": {"en": "outcome", "zh": "结果"},
    "runs.col_started": {"en": "started", "zh": "开始于"},
    "dead.col_categories": {"en": "error categories", "zh": "错误分类"},
    "dead.col_attempts": {"en": "attempts", "zh": "尝试次数"},
    "dead.col_failures": {"en": "first / last failure", "zh": "首次 / 末次失败"},
    "dead.col_last_error": {"en": "last error", "zh": "最后的错误"},
    "dead.col_error": {"en": "error", "zh": "错误"},
    "dead.evidence": {"en": "Evidence (newest dead tasks)", "zh": "证据（最新的死信任务）"},
    "dead.col_version": {"en": "code version", "zh": "代码版本"},
    "dead.col_input": {"en": "input reference", "zh": "输入引用"},
    "dead.col_providers": {"en": "provider ids", "zh": "provider ID"},
    "preview.effects_again": {"en": "performs again", "zh": "将再次执行"},
    "preview.effects_skip": {"en": "skips (confirmed)", "zh": "跳过（已确认）"},
    "preview.effects_note": {
        "en": "Effects a replay performs again have no confirmed receipt; confirmed ones are "
        "skipped. Effects the handler never reached are not listed.",
        "zh": "将再次执行的副作用没有已确认的回执；已确认的会被跳过。"
        "处理函数尚未执行到的副作用不在此列。",
    },
    "cli.h_run_id": {"en": "RUN", "zh": "批次"},
    "cli.h_filter": {"en": "FILTER", "zh": "筛选"},
    "cli.h_progress": {"en": "REPLAYED", "zh": "已重放"},
    "cli.h_died_again": {"en": "DIED AGAIN", "zh": "再次死亡"},
    "cli.h_batches": {"en": "BATCHES", "zh": "批数"},
    "cli.h_driver": {"en": "DRIVER", "zh": "执行者"},
    "cli.h_outcome": {"en": "OUTCOME", "zh": "结果"},
    "cli.h_started": {"en": "STARTED", "zh": "开始于"},
    "cli.h_categories": {"en": "CATEGORIES", "zh": "错误分类"},
    "cli.h_first_failure": {"en": "FIRST FAILURE", "zh": "首次失败"},
    "cli.h_last_failure": {"en": "LAST FAILURE", "zh": "末次失败"},
    "cli.h_last_error": {"en": "LAST ERROR", "zh": "最后的错误"},
    "cli.no_replay_runs": {"en": "no replay runs recorded", "zh": "没有重放批次记录"},
    "cli.dead_task": {
        "en": "    task {id}  {category}  attempts {attempts}/{max}  version {version}  "
        "input {input}  providers {providers}  failed {first} .. {last}  error {error}",
        "zh": "    任务 {id}  {category}  尝试 {attempts}/{max}  版本 {version}  "
        "输入 {input}  provider {providers}  失败 {first} .. {last}  错误 {error}",
    },
    "cli.preview_head": {
        "en": "{n} dead task(s) a replay would touch (dead before {until}):",
        "zh": "重放将处理 {n} 个死信任务（死于 {until} 之前）：",
    },
    "cli.preview_task": {
        "en": "  task {id}  {kind}  {reason}",
        "zh": "  任务 {id}  {kind}  {reason}",
    },
    "cli.preview_again": {"en": "    performs again: {names}", "zh": "    将再次执行：{names}"},
    "cli.preview_skip": {
        "en": "    skips (confirmed): {names}",
        "zh": "    跳过（已确认）：{names}",
    },
    "cli.preview_none": {
        "en": "no dead task matches; a replay would touch nothing",
        "zh": "没有匹配的死信任务；重放不会处理任何任务",
    },
    # -- cron --------------------------------------------------------------------------------
    "cron.title": {"en": "Cron", "zh": "定时任务"},
    "cron.col_cron": {"en": "cron", "zh": "cron 表达式"},
    "cron.col_tz": {"en": "tz", "zh": "时区"},
    "cron.col_catch_up": {"en": "catch-up", "zh": "补跑"},
    "cron.col_on_paused": {"en": "when paused", "zh": "暂停时"},
    "cron.col_last": {"en": "last window", "zh": "上一个窗口"},
    "cron.col_next": {"en": "next window", "zh": "下一个窗口"},
    "cron.not_registered": {"en": "(not registered here)", "zh": "（此处未注册）"},
    "cron.none": {"en": "No schedules.", "zh": "没有定时计划。"},
    "cron.no_windows": {"en": "No windows recorded yet.", "zh": "尚未记录任何窗口。"},
    "cron.skipped": {"en": "Skipped windows", "zh": "跳过的窗口"},
    # -- error page --------------------------------------------------------------------------
    "error.title": {"en": "Error {status}", "zh": "错误 {status}"},
    "error.back": {"en": "Back to the tasks", "zh": "返回任务列表"},
    # -- CLI: doctor ------------------------------------------------------------------------
    "doctor.head": {"en": "jobtrail doctor: {db}", "zh": "jobtrail 体检：{db}"},
    "doctor.ok": {"en": "ok", "zh": "正常"},
    "doctor.warn": {"en": "warn", "zh": "警告"},
    "doctor.fail": {"en": "FAIL", "zh": "失败"},
    "doctor.n/a": {"en": "n/a", "zh": "不适用"},
    "doctor.all_well": {"en": "all is well", "zh": "一切正常"},
    "doctor.problems": {"en": "{n} problem(s) found", "zh": "发现 {n} 个问题"},
    "doctor.c_reachable": {"en": "reachable", "zh": "可连接"},
    "doctor.c_schema": {"en": "schema", "zh": "表结构"},
    "doctor.c_listen/notify": {"en": "listen/notify", "zh": "LISTEN/NOTIFY"},
    "doctor.c_wake-up": {"en": "wake-up", "zh": "唤醒"},
    "doctor.c_clock": {"en": "clock", "zh": "时钟"},
    "doctor.c_pooler": {"en": "pooler", "zh": "连接池代理"},
    "doctor.c_file": {"en": "file", "zh": "数据库文件"},
    "doctor.c_directory": {"en": "directory", "zh": "目录"},
    "doctor.c_journal": {"en": "journal", "zh": "日志模式"},
    "doctor.c_synchronous": {"en": "synchronous", "zh": "同步设置"},
    "doctor.c_workers": {"en": "workers", "zh": "工作器"},
    # -- CLI: tables and cards ---------------------------------------------------------------
    "cli.no_tasks": {"en": "no tasks", "zh": "没有任务"},
    "cli.h_id": {"en": "ID", "zh": "编号"},
    "cli.h_kind": {"en": "KIND", "zh": "类型"},
    "cli.h_queue": {"en": "QUEUE", "zh": "队列"},
    "cli.h_tenant": {"en": "TENANT", "zh": "租户"},
    "cli.h_state": {"en": "STATE", "zh": "状态"},
    "cli.h_reason": {"en": "REASON", "zh": "原因"},
    "cli.h_attempts": {"en": "ATTEMPTS", "zh": "尝试"},
    "cli.h_run_at": {"en": "RUN AT", "zh": "计划运行"},
    "cli.h_updated": {"en": "UPDATED", "zh": "更新于"},
    "cli.h_queued": {"en": "QUEUED", "zh": "排队"},
    "cli.h_leased": {"en": "LEASED", "zh": "执行中"},
    "cli.h_waiting": {"en": "WAITING", "zh": "等待"},
    "cli.h_dead": {"en": "DEAD", "zh": "死信"},
    "cli.h_oldest_due": {"en": "OLDEST DUE", "zh": "最久到期"},
    "cli.h_in": {"en": "IN/MIN", "zh": "进/分"},
    "cli.h_out": {"en": "OUT/MIN", "zh": "出/分"},
    "cli.h_retries": {"en": "RETRIES", "zh": "重试"},
    "cli.h_expired": {"en": "EXPIRED", "zh": "租约过期"},
    "cli.h_wait": {"en": "WAIT p50/p95", "zh": "等待 p50/p95"},
    "cli.h_run": {"en": "RUN p50/p95", "zh": "运行 p50/p95"},
    "cli.h_oldest_dead": {"en": "OLDEST DEAD", "zh": "最早死信"},
    "cli.h_drain": {"en": "DRAIN", "zh": "清空用时"},
    "cli.h_count": {"en": "COUNT", "zh": "数量"},
    "cli.h_oldest": {"en": "OLDEST", "zh": "最早"},
    "cli.h_versions": {"en": "VERSIONS", "zh": "版本"},
    "cli.h_at": {"en": "AT", "zh": "时间"},
    "cli.h_worker": {"en": "WORKER", "zh": "工作器"},
    "cli.h_host": {"en": "HOST", "zh": "主机"},
    "cli.h_pid": {"en": "PID", "zh": "进程号"},
    "cli.h_version": {"en": "VERSION", "zh": "版本"},
    "cli.h_queues": {"en": "QUEUES", "zh": "队列"},
    "cli.h_kinds": {"en": "KINDS", "zh": "类型"},
    "cli.h_concurrency": {"en": "CONCURRENCY", "zh": "并发"},
    "cli.h_last_seen": {"en": "LAST SEEN", "zh": "最近心跳"},
    "cli.h_holds": {"en": "HOLDS", "zh": "持有任务"},
    "cli.no_workers": {
        "en": "no live workers",
        "zh": "没有存活的工作器",
    },
    "cli.h_action": {"en": "ACTION", "zh": "操作"},
    "cli.h_by": {"en": "BY", "zh": "操作人"},
    "cli.h_note": {"en": "NOTE", "zh": "备注"},
    "cli.h_data": {"en": "DATA", "zh": "数据"},
    "cli.status_head": {"en": "task {id}  {kind}", "zh": "任务 {id}  {kind}"},
    "cli.s_state": {"en": "state", "zh": "状态"},
    "cli.s_result": {"en": "result", "zh": "结果"},
    "cli.s_queue": {"en": "queue", "zh": "队列"},
    "cli.s_attempts": {"en": "attempts", "zh": "尝试"},
    "cli.s_run_at": {"en": "run at", "zh": "计划运行"},
    "cli.s_lease": {"en": "lease", "zh": "租约"},
    "cli.s_receipt": {"en": "receipt", "zh": "回执"},
    "cli.s_last_error": {"en": "last error", "zh": "最近错误"},
    "cli.s_parent": {"en": "parent", "zh": "父任务"},
    "cli.s_key": {"en": "key", "zh": "幂等键"},
    "cli.s_created": {"en": "created", "zh": "创建于"},
    "cli.s_updated": {"en": "updated", "zh": "更新于"},
    "cli.s_finished": {"en": "finished", "zh": "结束于"},
    "cli.s_dismissed": {"en": " [dismissed]", "zh": " [已搁置]"},
    "cli.s_tenant": {"en": "   tenant {tenant}", "zh": "   租户 {tenant}"},
    "cli.s_priority": {"en": "   priority {priority}", "zh": "   优先级 {priority}"},
    "cli.s_replayed": {"en": "   replayed {n}x", "zh": "   重放 {n} 次"},
    "cli.s_until": {"en": "{owner} until {at}", "zh": "{owner}，直到 {at}"},
    "cli.s_deadline": {"en": " (deadline {at})", "zh": "（截止 {at}）"},
    "stats.window_capped": {
        "en": "the window holds more than {n} transitions: these figures are of the newest {n},"
        " the last {seconds}s",
        "zh": "时间窗内的状态变更超过 {n} 条：以上数字只取最新的 {n} 条，即最近 {seconds} 秒",
    },
    "stats.at_least": {
        "en": "N+: N or more (counted up to N)",
        "zh": "N+：至少 N（只数到 N）",
    },
    "cli.stats_head": {
        "en": "queue health at {at} (rates per minute over the last {window}s)",
        "zh": "队列健康状况，截至 {at}（最近 {window} 秒内每分钟的速率）",
    },
    "cli.stats_pruned": {
        "en": "pruned so far: {succeeded} succeeded, {cancelled} cancelled, {dead} dead tasks",
        "zh": "已清理：成功 {succeeded} 个、已取消 {cancelled} 个、死信 {dead} 个任务",
    },
    "cli.q_paused": {
        "en": 'paused by {by} since {since} ("{note}")',
        "zh": "已暂停，操作人 {by}，始于 {since}（“{note}”）",
    },
    "cli.q_running": {"en": "running", "zh": "运行中"},
    "cli.q_limit_total": {"en": "at most {n} leased", "zh": "最多 {n} 个执行中"},
    "cli.q_limit_tenant": {"en": "at most {n} per tenant", "zh": "每租户最多 {n} 个"},
    "cli.q_no_limits": {"en": "no limits", "zh": "无限额"},
    # -- rates and ramps ---------------------------------------------------------------------
    "cli.q_rate": {"en": "at most {rate}/s", "zh": "每秒最多 {rate} 个"},
    "cli.q_rate_tenant": {"en": "at most {rate}/s per tenant", "zh": "每租户每秒最多 {rate} 个"},
    "cli.q_burst": {"en": "burst {n}", "zh": "突发 {n}"},
    "cli.q_ramp": {
        "en": "ramp of {seconds}s from {since}",
        "zh": "自 {since} 起 {seconds} 秒爬升",
    },
    "cli.q_rate_until": {"en": "rate ends at {at}", "zh": "限速于 {at} 结束"},
    "explain.rate_queue": {
        "en": "queue {queue} rate-limited at {rate}/s; next slot in {wait} s",
        "zh": "队列 {queue} 限速为每秒 {rate} 个；下一个名额在 {wait} 秒后",
    },
    "explain.rate_tenant": {
        "en": "tenant {tenant} of queue {queue} rate-limited at {rate}/s; next slot in {wait} s",
        "zh": "队列 {queue} 的租户 {tenant} 限速为每秒 {rate} 个；下一个名额在 {wait} 秒后",
    },
    "queues.rate": {"en": "rate {rate}/s", "zh": "限速每秒 {rate} 个"},
    "queues.rate_tenant": {"en": "{rate}/s per tenant", "zh": "每租户每秒 {rate} 个"},
    "queues.ramp": {"en": "ramping over {seconds}s", "zh": "{seconds} 秒内爬升"},
    "cli.q_line": {
        "en": "queue {queue}: {state}; {limits}",
        "zh": "队列 {queue}：{state}；{limits}",
    },
    "cli.q_sep": {"en": ", ", "zh": "，"},
    "cli.q_no_history": {
        "en": "no changes recorded for queue {queue}",
        "zh": "队列 {queue} 没有变更记录",
    },
    "cli.no_dead": {"en": "no dead tasks need attention", "zh": "没有需要处理的死信任务"},
    "cli.cron_none": {
        "en": "no cron schedules (pass --app to list the schedules your app registers)",
        "zh": "没有定时计划（传入 --app 以列出你的应用注册的计划）",
    },
    "cli.cron_not_registered": {"en": "  (not registered by this app)", "zh": "  （此应用未注册）"},
    "cli.cron_line": {
        "en": "{kind}  {cron}  tz {tz}  queue {queue}{flags}",
        "zh": "{kind}  {cron}  时区 {tz}  队列 {queue}{flags}",
    },
    "cli.cron_detail": {
        "en": "  catch_up {catch_up}, on_paused {on_paused}; last window {last}; "
        "next window {next}",
        "zh": "  补跑 {catch_up}，暂停时 {on_paused}；上一个窗口 {last}；下一个窗口 {next}",
    },
    "cli.cron_earlier": {"en": " (and {n} earlier)", "zh": "（及更早的 {n} 个）"},
    "cli.cron_skipped": {
        "en": "  skipped {window}  {reason}{earlier} — {sentence}",
        "zh": "  已跳过 {window}  {reason}{earlier} — {sentence}",
    },
    "cli.lang_help": {
        "en": "Language of the text for people (not of --json) [env JOBTRAIL_LANG].",
        "zh": "给人看的文字所用的语言（--json 不受影响）[环境变量 JOBTRAIL_LANG]。",
    },
    # -- demo --------------------------------------------------------------------------------
    "demo.start": {
        "en": "jobtrail demo — a fresh SQLite store at {path}",
        "zh": "jobtrail 演示 — 全新的 SQLite 存储，位于 {path}",
    },
    "demo.killed": {
        "en": "killed worker process {pid} with SIGKILL right after the platform accepted "
        "two submissions",
        "zh": "在平台接受两次提交之后，立即用 SIGKILL 杀死了 worker 进程 {pid}",
    },
    "demo.double_click": {
        "en": "double click: the same idempotency key returned task {id} (created={created})",
        "zh": "重复点击：同一个幂等键返回了任务 {id}（created={created}）",
    },
    "demo.cancel_before": {"en": "cancel before start: {outcome}", "zh": "开始前取消：{outcome}"},
    "demo.cancel_mid": {"en": "cancel mid-run: {outcome}", "zh": "运行中取消：{outcome}"},
    "demo.cancel_late": {
        "en": "cancel after the submission: {outcome}",
        "zh": "提交之后取消：{outcome}",
    },
    "demo.cancel_finished": {
        "en": "cancel of a finished task: {outcome}",
        "zh": "取消已结束的任务：{outcome}",
    },
    "demo.nothing_twice": {
        "en": "the platform holds {submissions} submissions (one per effect key) and {uploads} "
        "image uploads, {distinct} distinct: nothing was done twice",
        "zh": "平台上有 {submissions} 次提交（每个副作用键一次）和 {uploads} 次图片上传，"
        "其中 {distinct} 次互不相同：没有任何操作做了两次",
    },
    "demo.uploaded_twice": {
        "en": "WARNING: images uploaded twice: {uploads}",
        "zh": "警告：图片被上传了两次：{uploads}",
    },
    "demo.summary": {"en": "summary", "zh": "汇总"},
    "demo.summary_row": {
        "en": "  {name:<22} task {id:<4} {state:<10} ({reason})",
        "zh": "  {name:<22} 任务 {id:<4} {state:<10} ({reason})",
    },
    "demo.check": {
        "en": "invariant check (state == last transition): {result}",
        "zh": "不变式检查（状态 == 最后一次转换）：{result}",
    },
    "demo.clean": {"en": "clean", "zh": "通过"},
    "demo.kept": {
        "en": "the database is kept at {path}: try `jobtrail list --db {url}`",
        "zh": "数据库保留在 {path}：试试 `jobtrail list --db {url}`",
    },
    # -- explain: the controls of enqueue (debounce, expiry) ---------------------------------
    "explain.debounced": {
        "en": "debounced {times}; runs at {at}",
        "zh": "已防抖合并了 {times}；于 {at} 运行",
    },
    "explain.debounced_latest": {
        "en": "debounced {times}; runs at {at} (at the latest {latest})",
        "zh": "已防抖合并了 {times}；于 {at} 运行（最晚 {latest}）",
    },
    "explain.times": {"en": "{n} times", "zh": "{n} 次"},
    "explain.once": {"en": "once", "zh": "1 次"},
    "explain.expires": {"en": "expires at {at}", "zh": "于 {at} 过期"},
}

_FIELD = re.compile(r"\{(\w*)[^{}]*\}")


def t(key: str, lang: str = DEFAULT, /, **args: object) -> str:
    """The text of ``key`` in ``lang``, formatted with ``args`` (``str.format``). A missing
    key or language raises ``KeyError``: a gap in the catalog is a bug, not English."""
    text = MESSAGES[key][lang]
    return text.format(**args) if args else text


def fields(text: str) -> set[str]:
    """The ``{placeholder}`` names of a catalog text."""
    return set(_FIELD.findall(text))


def env_default() -> str:
    """The language of ``JOBTRAIL_LANG`` when it names one we have, else English."""
    value = os.environ.get(ENV, "").strip().lower()
    return value if value in LANGUAGES else DEFAULT


def from_accept_language(header: str | None) -> str | None:
    """The language among ours that an ``Accept-Language`` header prefers most (by q, then
    order), or ``None``: ``zh-CN,zh;q=0.9,en;q=0.8`` → ``zh``."""
    best: tuple[float, int, str] | None = None
    for index, part in enumerate((header or "").split(",")[:32]):
        tag, _, params = part.strip().partition(";")
        base = tag.strip().lower().split("-", 1)[0]
        if base not in LANGUAGES:
            continue
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0 and (best is None or (-q, index) < (best[0], best[1])):
            best = (-q, index, base)
    return best[2] if best else None


def pick(query: str | None, cookie: str | None, accept_language: str | None) -> str:
    """A web request's language: ``?lang=`` (validated by the caller), else the ``lang``
    cookie, else ``Accept-Language``, else English."""
    for chosen in (query, cookie):
        if chosen in LANGUAGES:
            return str(chosen)
    return from_accept_language(accept_language) or DEFAULT


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: two for each wide (CJK) character."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def ljust(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` display columns."""
    return text + " " * max(0, width - display_width(text))


# -- dashboard for people on call: search, bulk actions, live pages, the life picture, charts --
MESSAGES.update(
    {
        "nav.label": {"en": "Pages", "zh": "页面"},
        "form.note": {"en": "note", "zh": "备注"},
        "live.on": {"en": "live: updates by itself", "zh": "实时：自动更新"},
        "live.paused": {
            "en": "live updates paused while you fill a form",
            "zh": "填写表单时暂停实时更新",
        },
        "live.offline": {
            "en": "live updates: server not reachable",
            "zh": "实时更新：无法连接服务器",
        },
        "search.label": {"en": "Search", "zh": "搜索"},
        "search.placeholder": {
            "en": "payload.order_id = 17, error: timeout, key: …",
            "zh": "payload.order_id = 17、error: timeout、key: …",
        },
        "search.help": {
            "en": "Search by a payload field (payload.order_id = 17), error text (error: timeout), "
            "idempotency key (key: note-42), tenant (tenant: acme) or task id; the address "
            "of the results can be shared.",
            "zh": "可按负载字段（payload.order_id = 17）、错误文本（error: timeout）、幂等键"
            "（key: note-42）、租户（tenant: acme）或任务编号搜索；结果页的地址可以分享。",
        },
        "search.bounded": {
            "en": "This search read only the newest {n} tasks (no index serves it here).",
            "zh": "此搜索只读取了最新的 {n} 个任务（这里没有可用的索引）。",
        },
        "bulk.col_select": {"en": "select", "zh": "选择"},
        "bulk.select": {"en": "select task {id}", "zh": "选择任务 {id}"},
        "bulk.legend": {
            "en": "Act on the selected tasks",
            "zh": "对所选任务执行操作",
        },
        "bulk.select_all": {
            "en": "select all {n} matching the filter",
            "zh": "选择符合筛选条件的全部 {n} 个",
        },
        "bulk.select_all_more": {
            "en": "select the newest {n} matching the filter",
            "zh": "选择符合筛选条件的最新 {n} 个",
        },
        "bulk.bounded": {
            "en": "more match: one action takes at most {n}",
            "zh": "符合的更多：一次操作最多 {n} 个",
        },
        "bulk.cancel": {"en": "Cancel", "zh": "取消"},
        "bulk.replay": {"en": "Replay", "zh": "重放"},
        "bulk.dismiss": {"en": "Dismiss", "zh": "搁置"},
        "bulk.help": {
            "en": "Each task gets its own transition with your name and note. A replay shows "
            "what it would do to the tasks' effects before it starts; a task the action does "
            "not apply to is left alone and counted.",
            "zh": "每个任务各自记录一次带有你的名字和备注的转换。重放开始前会显示它对各任务副作用"
            "的影响；操作不适用的任务保持不变并计入统计。",
        },
        "bulk.confirm_title": {"en": "Replay the selected tasks?", "zh": "重放所选任务？"},
        "bulk.confirm_count": {
            "en": "dead tasks would be replayed, one transition each.",
            "zh": "个死信任务将被重放，每个一次转换。",
        },
        "bulk.not_dead": {
            "en": "{n} selected tasks are not dead and are left alone.",
            "zh": "所选任务中有 {n} 个不是死信，保持不变。",
        },
        "bulk.shown": {"en": "The first {n} are shown.", "zh": "只显示前 {n} 个。"},
        "bulk.replay_n": {"en": "Replay {n} tasks", "zh": "重放 {n} 个任务"},
        "bulk.back": {"en": "Back to the tasks", "zh": "返回任务列表"},
        "bulk.title": {"en": "Bulk action", "zh": "批量操作"},
        "bulk.summary": {
            "en": "{action}, by {by}: “{note}”",
            "zh": "{action}，操作人 {by}：“{note}”",
        },
        "bulk.progress": {
            "en": "{done} of {total} tasks done",
            "zh": "已完成 {done}/{total} 个任务",
        },
        "bulk.finished": {"en": "finished", "zh": "已完成"},
        "bulk.running": {"en": "running…", "zh": "进行中…"},
        "bulk.outcomes": {"en": "Outcomes", "zh": "结果"},
        "bulk.outcome": {"en": "outcome", "zh": "结果"},
        "bulk.none_yet": {"en": "none yet", "zh": "暂无"},
        "bulk.failures": {"en": "Failures", "zh": "失败"},
        "bulk.tasks": {"en": "Tasks:", "zh": "任务："},
        "life.title": {"en": "Its life", "zh": "生命周期"},
        "life.run": {"en": "attempt {n}", "zh": "第 {n} 次尝试"},
        "life.queue": {"en": "queued", "zh": "排队"},
        "life.retry": {"en": "waiting to retry", "zh": "等待重试"},
        "life.sleep": {"en": "sleeping", "zh": "休眠"},
        "life.wait_event": {"en": "waiting for an event", "zh": "等待事件"},
        "life.wait_children": {"en": "waiting for its children", "zh": "等待子任务"},
        "life.wait": {"en": "waiting", "zh": "等待"},
        "life.receipt": {"en": "waiting for the receipt", "zh": "等待回执"},
        "life.cancelling": {"en": "cancelling", "zh": "取消中"},
        "life.goes_on": {"en": "now", "zh": "至今"},
        "life.end": {
            "en": "ended {state} ({reason}) at +{at}",
            "zh": "于 +{at} 结束：{state}（{reason}）",
        },
        "life.item": {
            "en": "{phase}: {took} ({start} → {end})",
            "zh": "{phase}：{took}（{start} → {end}）",
        },
        "life.lane_queue": {"en": "queued", "zh": "排队"},
        "life.lane_run": {"en": "attempts", "zh": "尝试"},
        "life.lane_retry": {"en": "retry waits", "zh": "重试等待"},
        "life.lane_sleep": {"en": "sleeps", "zh": "休眠"},
        "life.lane_wait": {"en": "waits", "zh": "等待"},
        "life.lane_receipt": {"en": "receipt wait", "zh": "回执等待"},
        "life.axis": {"en": "time since it was enqueued", "zh": "自入队起的时间"},
        "chart.title": {"en": "Activity per queue", "zh": "各队列的活动"},
        "chart.label": {
            "en": "queue {queue}: {arrived} arrived and {finished} finished in the last "
            "{minutes} minutes",
            "zh": "队列 {queue}：最近 {minutes} 分钟到达 {arrived} 个，完成 {finished} 个",
        },
        "chart.bucket": {
            "en": "{ago} min ago: {arrived} arrived, {finished} finished",
            "zh": "{ago} 分钟前：到达 {arrived}，完成 {finished}",
        },
        "chart.now": {"en": "now", "zh": "现在"},
        "chart.legend": {
            "en": "bars: arrivals, line: completions, per {minutes} min; axis: minutes before now",
            "zh": "柱：到达，线：完成，每 {minutes} 分钟；横轴：距现在的分钟数",
        },
        "queues.col_workers": {"en": "served by", "zh": "服务的工作器"},
        "queues.its_tasks": {"en": "its tasks", "zh": "其任务"},
        "queues.no_workers": {"en": "no live worker", "zh": "没有存活的工作器"},
        "queue.title": {"en": "Queue {queue}", "zh": "队列 {queue}"},
        "queue.workers": {"en": "Live workers serving it", "zh": "为它服务的存活工作器"},
    }
)


# -- replay from a step (durable-ui) ----------------------------------------------------------
MESSAGES.update(
    {
        "task.replay_from": {"en": "from step", "zh": "从步骤"},
        "task.replay_from_none": {
            "en": "(none: recorded steps return their results)",
            "zh": "（无：已记录的步骤返回其结果）",
        },
        "task.replay_from_effect": {
            "en": "effect: runs again",
            "zh": "副作用：将再次执行",
        },
        "cli.replay_preview_head": {
            "en": "task {id} ({kind}, {state}): a replay{start} would",
            "zh": "任务 {id}（{kind}，{state}）：重放{start}将",
        },
        "cli.replay_from": {"en": " from step '{step}'", "zh": "从步骤 '{step}' 开始"},
        "cli.replay_not_dead": {
            "en": "    (not dead: replay refuses it until it is)",
            "zh": "    （不是死信：在它成为死信之前重放会被拒绝）",
        },
        "cli.replay_forgets": {
            "en": "    forget and run again: {names}",
            "zh": "    遗忘并再次运行：{names}",
        },
        "cli.replay_forgets_none": {
            "en": "    forget nothing (recorded steps return their results)",
            "zh": "    不遗忘任何内容（已记录的步骤返回其结果）",
        },
        "cli.replay_done": {
            "en": "{line}; replay #{count}",
            "zh": "{line}；第 {count} 次重放",
        },
        "cli.replay_done_from": {
            "en": "{line}; replay #{count} from step '{step}', forgot: {names}",
            "zh": "{line}；第 {count} 次重放，从步骤 '{step}' 开始，已遗忘：{names}",
        },
    }
)


# -- durable handlers in stats and metrics, events sent from outside (durable-ui) -------------
MESSAGES.update(
    {
        "cli.h_suspended": {"en": "SLEEP/EVENT/JOIN", "zh": "休眠/事件/子任务"},
        "cli.event_sent": {
            "en": "event {key!r} sent; woke {n} task(s)",
            "zh": "事件 {key!r} 已发送；唤醒了 {n} 个任务",
        },
    }
)


# -- the dashboard's queue health: suspended durable handlers (dash2) ------------------------
MESSAGES.update(
    {
        "queues.suspended": {
            "en": "suspended: {sleeping} sleeping, {event} waiting for events, "
            "{children} for children",
            "zh": "挂起：{sleeping} 休眠，{event} 等待事件，{children} 等待子任务",
        },
    }
)
