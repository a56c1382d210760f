"""``trainer.benchmark.benchmark(config) -> report``: the config's type picks the benchmark.

``BenchmarkConfig`` runs the in-process batch-1 decoder (concurrency 1, no server);
``ServingBenchmarkConfig`` starts a server per configuration and drives it with guidellm at
several concurrency levels. Both take the same ``should_stop`` and ``progress`` callbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import overload

from trainer.benchmark.config import BenchmarkConfig
from trainer.benchmark.report import BenchmarkReport
from trainer.benchmark.run import benchmark as batch_benchmark
from trainer.benchmark.serving_config import ServingBenchmarkConfig
from trainer.benchmark.serving_report import ServingReport
from trainer.benchmark.serving_run import serving_benchmark


@overload
def benchmark(
    config: BenchmarkConfig,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BenchmarkReport: ...


@overload
def benchmark(
    config: ServingBenchmarkConfig,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ServingReport: ...


def benchmark(
    config: BenchmarkConfig | ServingBenchmarkConfig,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BenchmarkReport | ServingReport:
    if isinstance(config, ServingBenchmarkConfig):
        return serving_benchmark(config, should_stop, progress)
    return batch_benchmark(config, should_stop, progress)
