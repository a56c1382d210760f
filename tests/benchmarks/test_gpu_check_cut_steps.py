"""scripts/gpu-check.sh keeps what a step printed before its time limit stopped it.

Each step runs under ``timeout``, whose SIGTERM ends a Python process without flushing its
buffered stdout: the engine table (``benchmarks/engine_speed.py`` prints a row as each figure is
taken) would come back empty if it ran over its share of the deadline, every row already
measured lost. And a step stopped at its limit leaves its ``--json`` report empty (the training
that replaces the ship build writes ``train.json`` last), which must not cost the summary its
other rows. Here a stand-in Python runs every step: training writes nothing, and the engine
table prints one row and then outlasts its limit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.benchmarks.gpu_check_script import run_gpu_check

# Every step but the engine table and the summary is a no-op; the engine table prints a row and
# hangs until `timeout` stops it.
ROW = "| a row taken before the limit | 1 |"
STAND_IN = f"""#!/usr/bin/env bash
case "$*" in
    *benchmarks/engine_speed.py*) exec {{python}} -c 'import time; print("{ROW}"); time.sleep(60)' ;;
    *scripts/gpu_check_summary.py*) exec {{python}} "$@" ;;
    *) exit 0 ;;
esac
"""


def test_a_step_stopped_at_its_limit_keeps_the_rows_it_printed(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text(STAND_IN.format(python=sys.executable))
    python.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    out, work = tmp_path / "out", tmp_path / "work"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    env |= {
        "PY": str(python),
        "DEVICE": "cpu",
        "SHIP": "0",
        "MODEL": str(model),
        "OUT": str(out),
        "WORK": str(work),
        "DATA_WHEELS": str(tmp_path / "no-wheels"),
        "SPEED_SECONDS": "3",
    }
    done = run_gpu_check(env, timeout=120)
    output = done.stdout + done.stderr
    assert "engine speed FAILED or over its time" in output, output[-3000:]
    summary = (out / "summary.md").read_text()
    assert ROW in summary, output[-3000:]
    assert "| head build | none |" in summary, summary
    assert "Traceback" not in summary, summary
