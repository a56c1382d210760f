"""wait_for_job's stage lines: every stage the job entered, even one shorter than a poll."""

from __future__ import annotations

import io
from typing import Any

from client.progress import _JobBar


def _detail(status: str, stage: str | None, *history: str | None) -> dict[str, Any]:
    events = [{"Status": status, "Stage": entered, "Message": "m"} for entered in history]
    return {"OptimizationJobStatus": status, "Stage": stage, "ProgressPercent": 50.0, "Events": events}


def test_a_stage_that_began_and_ended_between_two_polls_is_still_written() -> None:
    out = io.StringIO()
    bar = _JobBar("job-1", enabled=True, file=out)
    bar.show(_detail("INPROGRESS", "validate", None, "validate"))
    # Between two polls the job went through train and benchmark: only the history shows them.
    bar.show(_detail("INPROGRESS", "publish", None, "validate", "train", "validate", "benchmark", "publish"))
    bar.show(_detail("COMPLETED", "publish", None, "validate", "train", "benchmark", "publish", "publish"))
    bar.close()
    lines = [line.strip() for line in out.getvalue().replace("\r", "\n").splitlines()]
    stage_lines = [line for line in lines if line.startswith("job-1: stage")]
    assert stage_lines == [f"job-1: stage {stage}" for stage in ("validate", "train", "benchmark", "publish")]
    assert "job-1: COMPLETED" in lines


def test_no_bar_writes_nothing() -> None:
    out = io.StringIO()
    bar = _JobBar("job-1", enabled=False, file=out)
    bar.show(_detail("INPROGRESS", "train", "validate", "train"))
    bar.close()
    assert out.getvalue() == ""
