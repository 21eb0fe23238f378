"""huey 3.5 (SqliteHuey) through its public API. Results are stored, so finished jobs are
counted in huey's own ``kv`` table. Huey has no bulk enqueue."""

from __future__ import annotations

import json
import sys

from _common import CONCURRENCY, latency, record_latency, timed
from huey import SqliteHuey

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
path = url[len("sqlite:///") :]
huey = SqliteHuey(filename=path)


@huey.task()
def noop(t: float | None = None) -> int:
    record_latency(t)
    return 1


if phase == "setup":
    huey.storage.flush_queue()
elif phase == "enqueue_single":
    timed(lambda: [noop() for _ in range(n)] and None, n)
elif phase == "enqueue_bulk":
    print(json.dumps({"skip": "huey has no bulk enqueue"}))
elif phase == "work":
    huey.create_consumer(workers=CONCURRENCY, worker_type="thread").run()
elif phase == "latency":
    latency(__file__, url, n, lambda t: noop(t=t) and None)
