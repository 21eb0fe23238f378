"""What ``payloads.encode`` costs per KB of payload, by kind of value and size.

    python bench/encode.py                    # the table, sizes 1 KB .. 1 MB
    python bench/encode.py --sizes 1,16       # a quick run
    python bench/encode.py --budget 5         # skip sizes that would take > 5 s if quadratic

Run it with the project's environment (jobtrail importable); ``PYTHONPATH=<other tree>/src``
measures another version of the code. A payload is a list of one kind of value, as long as it
takes for its compact JSON (what a client sends) to reach the size: a KB is 1,024
bytes of that input, not of the stored text (``1e300`` is 5 bytes in, 303 bytes stored). Each
cell is the best of several runs (at least 0.3 s of runs, at most 20), in µs per input KB;
equal cells across sizes mean linear cost. The encoder's byte limit is lifted, so what is timed
is encoding, not the refusal of a payload over 1 MiB. The two last lines time the ``1e300``
payloads of the finding (8,000 and 16,000 floats, 55 / 109 KB in): run once each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from jobtrail.core.payloads import encode

NO_LIMIT = 1 << 40

#: name → value number i of a payload of that kind
KINDS: dict[str, Callable[[int], Any]] = {
    "floats plain": lambda i: i / 7 + 0.5,
    "floats 1e300": lambda i: 1e300,
    "floats 1.xe+2xx": lambda i: float(f"1.{i % 997}e+{200 + i % 100}"),
    "ints": lambda i: i * 7919,
    "strings": lambda i: f"item-{i}-ünïcode",
}


def payload_of(kind: str, kb: int) -> list[Any]:
    make = KINDS[kind]
    one = len(compact(make(1))) + 1  # the value and its comma
    values = [make(i) for i in range(max(1, kb * 1024 // one))]
    return values


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def best_of(payload: Any, *, min_total: float = 0.3, max_runs: int = 20) -> tuple[float, int]:
    """(best seconds per encode, runs made)."""
    best = float("inf")
    total = 0.0
    runs = 0
    while runs < max_runs and (runs == 0 or total < min_total):
        start = time.perf_counter()
        encode(payload, NO_LIMIT)
        took = time.perf_counter() - start
        best = min(best, took)
        total += took
        runs += 1
    return best, runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,16,256,1024", help="KB, comma separated")
    parser.add_argument(
        "--budget",
        type=float,
        default=30.0,
        help="seconds: a size is skipped when the one before it, grown quadratically, would "
        "take longer",
    )
    parser.add_argument("--no-finding", action="store_true", help="skip the 8,000/16,000 lines")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    head = "µs per KB".ljust(18) + "".join(f"{f'{s} KB':>12}" for s in sizes)
    print(head)
    print("-" * len(head))
    for kind in KINDS:
        cells = []
        last: tuple[int, float] | None = None
        for kb in sizes:
            if last is not None and last[1] * (kb / last[0]) ** 2 > args.budget:
                cells.append("skipped")  # even if linear it would be slow; quadratic: hopeless
                continue
            payload = payload_of(kind, kb)
            real_kb = len(compact(payload)) / 1024
            seconds, _ = best_of(payload)
            cells.append(f"{seconds * 1e6 / real_kb:.1f}")
            last = (kb, seconds)
        print(kind.ljust(18) + "".join(f"{c:>12}" for c in cells), flush=True)
    if not args.no_finding:
        print()
        for n in (8_000, 16_000):
            payload = [1e300] * n
            start = time.perf_counter()
            encode(payload, NO_LIMIT)
            took = time.perf_counter() - start
            kb = len(compact(payload)) / 1024
            print(f"{n:,} floats of 1e300 ({kb:.0f} KB in): {took * 1e3:,.1f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
