"""Benchmark draft heads as a server would be measured: TTFT, TPOT, ITL, throughput, acceptance.

``benchmark(config) -> BenchmarkReport`` is what the worker's benchmark stage calls. It runs
the engine's batch-1 speculative decoder (concurrency 1) and computes the metrics from
per-chunk timestamps; a serving engine with continuous batching can replace the run
behind the same config and report.
"""

from trainer.benchmark.config import BenchmarkConfig, BenchmarkConfiguration
from trainer.benchmark.report import BenchmarkReport, BenchmarkRow
from trainer.benchmark.run import BASELINE, benchmark

__all__ = [
    "BASELINE",
    "BenchmarkConfig",
    "BenchmarkConfiguration",
    "BenchmarkReport",
    "BenchmarkRow",
    "benchmark",
]
