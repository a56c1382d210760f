"""`make demo`'s script end to end: the README's first command must not break silently again.

scripts/demo.sh runs as a user runs it -- the embedded stack, the real AWS CLI, SmolLM2 --
with a one-minute training budget and a short benchmark, and must exit 0 after printing the
benchmark table, the deployment recommendation and the lineage through `eaglenest client
results`.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.long]

REPO_ROOT = Path(__file__).resolve().parents[2]
# Setup (stack, uploads), half a minute of fine-tuning, a two-level benchmark of four configurations.
DEMO_TIMEOUT_SECONDS = 900


def test_demo_script_completes_and_prints_the_results(smollm2_dir: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DEMO_STATE_DIR": str(tmp_path / "state"),
        "DEMO_BASE_MINUTES": "0.5",
        "DEMO_TRAIN_MINUTES": "0.5",
        "DEMO_MAX_RUNTIME": "800",
        "DEMO_BENCHMARK_PROMPTS": "2",
        "DEMO_BENCHMARK_REQUESTS": "2",
        "DEMO_BENCHMARK_TOKENS": "16",
        "DEMO_CONCURRENCY": "1,2",
        "DEMO_K_SWEEP": "2",
        "DEMO_POLL_SECONDS": "3",
    }
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "demo.sh")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
    )

    output = done.stdout
    assert done.returncode == 0, f"demo exited {done.returncode}\n{output[-4000:]}\n{done.stderr[-4000:]}"
    lines = output.splitlines()
    assert "| Configuration | Concurrency | TTFT (ms) | TPOT (ms) | ITL (ms) |" in output
    for configuration in ("No EAGLE", "Base EAGLE", "Trained EAGLE", "Trained EAGLE (K=2)"):
        for level in (1, 2):
            assert any(line.startswith(f"| {configuration} | {level} |") for line in lines), configuration
    assert "Deployment recommendation" in output
    assert any(line.startswith("  concurrency 2: ") for line in lines)
    assert "Lineage of arn:aws:sagemaker:" in output
    assert "a demo budget" in output
    # The shipped head is named with the budget of its whole chain of builds, from its manifest.
    assert re.search(r"trained ahead of time for [0-9.]+ (wall|cpu)-minutes", output), output[-4000:]
    assert (tmp_path / "state" / "results" / "lineage.json").is_file()
