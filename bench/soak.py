"""The chaos soak at size: ``python bench/soak.py --backend postgres --tasks 10000``.

Same code as ``tests/chaos/test_soak.py`` (``tests/chaos/soak.py``), bigger: prints progress and
a JSON summary (tasks, kills, worker starts, PostgreSQL restarts, proxy cuts, duration, final
states, invariant violations, provider calls / applied / deduplicated repeats) and exits 1 on
any problem. PostgreSQL runs on a private throwaway cluster (needs root, initdb, runuser).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "tests" / "integration")]

from chaos import soak  # noqa: E402

import jobtrail  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=3.0)
    parser.add_argument("--cut-every", type=float, default=2.5)
    parser.add_argument("--error-rate", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jobtrail-soak-") as tmp:
        root = Path(tmp)
        cluster = None
        if args.backend == "postgres":
            from test_pg_restart import PrivateCluster, _pg_version

            version = _pg_version()
            if version is None:
                print("no local PostgreSQL installation", file=sys.stderr)
                return 2
            cluster = PrivateCluster(version)
            url = cluster.url
        else:
            url = f"sqlite:///{root / 'soak.db'}"
        try:
            with jobtrail.App(url) as app:
                app.migrate()
            res = soak.run(
                root=root,
                url=url,
                tasks=args.tasks,
                workers=args.workers,
                concurrency=args.concurrency,
                kill_every=args.kill_every,
                cut_every=args.cut_every,
                error_rate=args.error_rate,
                timeout=args.timeout,
                pg_restart=cluster,
                seed=args.seed,
                progress=True,
            )
        finally:
            if cluster is not None:
                cluster.close()
    print(soak.report(res))
    return 1 if (res.problems or res.violations or res.log_errors) else 0


if __name__ == "__main__":
    sys.exit(main())
