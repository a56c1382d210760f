"""The Python client shim: boto3 for eaglenest, plus the waiter, progress and results SageMaker lacks.

from client import eaglenest_client, wait_for_job, download_results, benchmark_table

client = eaglenest_client()            # a real boto3 SageMaker client
client.create_optimization_job(...)    # every boto3 call works unchanged
client.get_waiter("optimization_job_completed_or_stopped").wait(OptimizationJobName=name)
wait_for_job(client, name)             # the same, with a progress bar
results = download_results(client, name, "out/")   # sha256-checked against lineage.json
benchmark_table(results)
deployment_recommendation(results)     # what to deploy at each concurrency level
request_shortfalls(results)            # rows whose means stand on fewer requests than were sent
"""

from client.benchmark_table import (
    BENCHMARK_TABLE_COLUMNS,
    BenchmarkTableRow,
    benchmark_table,
    deployment_recommendation,
    request_shortfalls,
)
from client.connection import ClientSettings, resolve_client_settings
from client.errors import (
    ChecksumMismatch,
    ChecksumMismatchError,
    EaglenestClientError,
    EndpointNotConfiguredError,
    IncompleteOutputError,
    OptimizationJobFailedError,
    OptimizationJobNotFinishedError,
    OptimizationJobNotFoundError,
    OptimizationJobWaiterError,
    WaitTimeoutError,
)
from client.factory import eaglenest_client
from client.install_waiters import InstalledWaiters, install_waiters
from client.job_waiter import OptimizationJobWaiter, optimization_job_waiter
from client.progress import wait_for_job
from client.rest import describe_job_progress
from client.results import DownloadedResults, download_results
from client.waiter_model import OPTIMIZATION_JOB_WAITER, OPTIMIZATION_JOB_WAITER_BOTO3_NAME

__all__ = [
    "BENCHMARK_TABLE_COLUMNS",
    "OPTIMIZATION_JOB_WAITER",
    "OPTIMIZATION_JOB_WAITER_BOTO3_NAME",
    "BenchmarkTableRow",
    "ChecksumMismatch",
    "ChecksumMismatchError",
    "ClientSettings",
    "DownloadedResults",
    "EaglenestClientError",
    "EndpointNotConfiguredError",
    "IncompleteOutputError",
    "InstalledWaiters",
    "OptimizationJobFailedError",
    "OptimizationJobNotFinishedError",
    "OptimizationJobNotFoundError",
    "OptimizationJobWaiter",
    "OptimizationJobWaiterError",
    "WaitTimeoutError",
    "benchmark_table",
    "deployment_recommendation",
    "describe_job_progress",
    "download_results",
    "eaglenest_client",
    "install_waiters",
    "optimization_job_waiter",
    "request_shortfalls",
    "resolve_client_settings",
    "wait_for_job",
]
