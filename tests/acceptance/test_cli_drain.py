"""``jobtrail worker --burst --drain S``: the real CLI waits for a retry due
within S seconds before it exits; a bad --drain is refused (exit 2) before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

APP = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("flaky")
    def flaky(ctx, payload):
        if ctx.attempt == 1:
            raise jobtrail.TransientError("busy", category="unavailable", retry_after=0.3)
        return "ok"
""")


def _cli(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["JOBTRAIL_DATABASE_URL"] = f"sqlite:///{cwd / 't.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "jobtrail", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def test_worker_burst_drain_waits_for_a_retry_and_bad_values_are_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "drainapp.py").write_text(APP)
    _cli(tmp_path, "migrate")
    task = json.loads(_cli(tmp_path, "enqueue", "flaky", "--app", "drainapp:app", "--json").stdout)
    app = ("--app", "drainapp:app")
    for bad, says in (
        (("--burst", "--drain", "-1"), "--drain"),  # the rest of the range: test_drain.py
        (("--drain", "5"), "--drain needs --burst"),
    ):
        err = _cli(tmp_path, "worker", *app, *bad, code=2).stderr
        assert says in err, err
    assert json.loads(_cli(tmp_path, "status", task["id"], "--json").stdout)["attempts"] == 0

    out = _cli(tmp_path, "worker", *app, "--burst", "--drain", "10", "--poll-interval", "0.05")
    assert "processed 2 attempt(s)" in out.stdout
    done = json.loads(_cli(tmp_path, "status", task["id"], "--json").stdout)
    assert (done["state"], done["attempts"]) == ("succeeded", 2)
