"""The cost of tracing (issue 18): enqueue and processing rates with the
OpenTelemetry SDK on and off, same run, same machine.

    python bench/tracing.py                       # N=5,000 no-op tasks, 3 rounds, both backends
    python bench/tracing.py --n 2000 --rounds 1 --backends sqlite

"off": ``opentelemetry-api`` installed, no SDK provider (what an application without tracing
set up gets: OpenTelemetry's no-op spans; jobtrail then stores no context and reads none).
"sdk": an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` and an exporter that drops the
spans (the cost of making and batching spans, not of shipping them). Each round runs off and sdk
on a fresh store; rounds alternate the order; the table shows medians.

Columns: enqueue (tasks/s, one ``enqueue`` call each, one thread), process (tasks/s, one burst
worker of concurrency 10 in this process, from its start to the last outcome, counted in the
store), and the CPU time of this process per task for each (``time.process_time``: the client
side, where tracing runs; steadier than the rates on a shared machine). PostgreSQL: ``--pg``
(default ``JOBTRAIL_TEST_PG_URL``), a fresh database per store.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import jobtrail
from jobtrail.core import tracing


class Drop(SpanExporter):
    """Counts the spans and drops them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def fresh_url(backend: str, pg: str, tmp: Path, name: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp / (name + '.db')}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return pg.rsplit("/", 1)[0] + "/" + name


def one(backend: str, mode: str, n: int, pg: str, tmp: Path) -> dict[str, Any]:
    name = f"bench_tracing_{backend}_{mode}"
    url = fresh_url(backend, pg, tmp, name)
    exporter = Drop()
    provider = None
    if mode == "sdk":
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65536))
        tracing.use_provider(provider)
    try:
        app = jobtrail.App(url)
        app.migrate()

        @app.task("noop")
        def noop(ctx: Any, payload: Any) -> None:
            pass

        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            app.enqueue("noop", {"i": i})
        enqueue = n / (time.perf_counter() - start)
        enqueue_cpu = (time.process_time() - cpu) / n * 1e6
        start, cpu = time.perf_counter(), time.process_time()
        done = app.run_worker(burst=True, concurrency=10, poll_interval=0.05)
        process = n / (time.perf_counter() - start)
        process_cpu = (time.process_time() - cpu) / n * 1e6
        finished = sum(1 for t in app.list(state="succeeded", limit=n) if t)
        if done != n or finished != n:
            sys.exit(f"{backend}/{mode}: {done} processed, {finished} succeeded, of {n}")
        app.close()
        if provider is not None:
            provider.force_flush()
            provider.shutdown()
            if exporter.spans < 2 * n:
                sys.exit(f"{backend}/{mode}: {exporter.spans} spans exported, of {2 * n}")
    finally:
        tracing.use_provider(None)
    return {
        "enqueue": enqueue,
        "process": process,
        "enqueue_cpu": enqueue_cpu,
        "process_cpu": process_cpu,
        "spans": exporter.spans,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,pg")
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for backend in args.backends.split(","):
                modes = ("off", "sdk") if r % 2 == 0 else ("sdk", "off")
                for mode in modes:
                    got = one(backend, mode, args.n, args.pg, Path(tmp))
                    results.setdefault((backend, mode), []).append(got)
                    print(
                        f"round {r + 1} {backend:6} {mode:3}: enqueue {got['enqueue']:7.0f}/s"
                        f"  process {got['process']:7.0f}/s  CPU µs/task {got['enqueue_cpu']:5.0f}"
                        f" / {got['process_cpu']:5.0f}  spans {got['spans']}",
                        flush=True,
                    )
    print(f"\nN={args.n}, {args.rounds} rounds, medians")
    keys = ("enqueue", "process", "enqueue_cpu", "process_cpu")
    print(
        f"{'backend':8} {'mode':4} {'enqueue/s':>10} {'process/s':>10}"
        f" {'enqueue CPU µs':>15} {'process CPU µs':>15}"
    )
    for backend in args.backends.split(","):
        base: dict[str, float] = {}
        for mode in ("off", "sdk"):
            rows = results[(backend, mode)]
            med = {k: statistics.median(r[k] for r in rows) for k in keys}
            line = (
                f"{backend:8} {mode:4} {med['enqueue']:10.0f} {med['process']:10.0f}"
                f" {med['enqueue_cpu']:15.0f} {med['process_cpu']:15.0f}"
            )
            if mode == "off":
                base = med
            else:
                line += "   " + ", ".join(
                    f"{med[k] / base[k] - 1:+.0%} {k.replace('_', ' ')}" for k in keys
                )
            print(line)


if __name__ == "__main__":
    main()
