"""Runs scripts/gpu-check.sh as the device machine would, for the tests that try it on a CPU."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_gpu_check(env: Mapping[str, str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """The script's run under ``env`` from the repository root (never raising on its exit status)."""
    return subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "gpu-check.sh")],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
