"""``python -m trainer check-data``: what a user runs before uploading data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )


def test_check_data_prints_the_summary(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "a", "completion": "b"}\nnot json\n')
    completed = _run("check-data", str(data))
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["records_read"] == 2
    assert summary["files"][0]["skipped"][0]["line"] == 2


def test_check_data_reports_bad_input_as_one_line(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("not json\n")
    completed = _run("check-data", str(data))
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        f"error: {data}: no usable record (1 read, all skipped); first at line 1: "
        "invalid JSON: Expecting value (column 1)"
    )
