"""Task handles: the task handle is generic in the payload type. mypy (strict) checks
``tests/typing/handles_typed.py``: the handle of ``def publish(ctx, payload: Note)`` is
``TaskHandle[Note]``, its ``enqueue`` returns a ``Task``, and the lines marked ``# E:`` — a
dict or an int where a ``Note`` is due, a string priority — are errors, and only those."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

SAMPLE = Path(__file__).resolve().parents[1] / "typing" / "handles_typed.py"


def test_mypy_sees_the_payload_type_of_a_handle() -> None:
    out, err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir=/dev/null", "--no-error-summary"]
        + [str(SAMPLE)]
    )
    lines = [line for line in out.splitlines() if line.split(":")[0].endswith(SAMPLE.name)]
    notes = [line for line in lines if ": note: Revealed type is" in line]
    errors = {int(line.split(":")[1]) for line in lines if ": error:" in line}
    revealed = [re.sub(r".*Revealed type is ", "", n) for n in notes]
    assert revealed == [
        '"jobtrail.app.handles.TaskHandle[handles_typed.Note]"',
        '"jobtrail.model.models.Task"',
        '"jobtrail.app.handles.TaskHandle[dict[str, Any]]"',
        '"jobtrail.model.models.Task"',
    ], out + err
    source = SAMPLE.read_text().splitlines()
    marked = {i + 1 for i, line in enumerate(source) if "# E:" in line}
    assert errors == marked, out + err
    assert status == 1
