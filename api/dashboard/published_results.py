"""A finished job's published results, read back from its S3OutputLocation.

lineage.json is the commit marker (worker/stages/publish.py writes it last): without it, or
with one that names another job, the location holds no complete result of this job.
"""

from __future__ import annotations

import logging
from typing import Any

from api.dashboard.shapes import BenchmarkTableRowShape, JobResults, PublishedArtifact
from core.benchmark_table import metric_definitions_of, request_shortfalls_of, table_rows
from core.job_errors import JobFailedError
from core.output_layout import BENCHMARK_JSON, LINEAGE
from core.s3 import S3Location, s3_client
from core.s3_store import S3Store
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus
from db.queries.role import RoleCredentials
from db.settings import Settings

logger = logging.getLogger(__name__)


def read_job_results(job: OptimizationJob, *, settings: Settings, role: RoleCredentials | None) -> JobResults:
    """The results as ``role`` (the job's RoleArn) can read them; None: the role was deleted."""
    output = S3Location.parse(
        str(job.output_config.get("S3OutputLocation", "")), field="OutputConfig.S3OutputLocation"
    ).as_directory
    lineage_location = output.child(LINEAGE)
    results = JobResults(available=False, output_location=output.uri, lineage_uri=lineage_location.uri)
    if job.status is not OptimizationJobStatus.COMPLETED:
        reason = f"the job is {job.status.value}; results are published when it is COMPLETED"
        return results.model_copy(update={"reason": reason})
    if role is None:
        reason = f"the job's role {job.role_arn} is no longer registered to the account"
        return results.model_copy(update={"reason": reason})
    credentials = (role.access_key_id, role.secret_access_key)
    store = S3Store(s3_client(settings, region=job.region, credentials=credentials))
    try:
        if store.head(lineage_location) is None:
            return results.model_copy(update={"reason": f"{lineage_location.uri} does not exist (yet)"})
        lineage = store.read_json(lineage_location)
        if not isinstance(lineage, dict) or (lineage.get("job") or {}).get("arn") != job.arn:
            return results.model_copy(
                update={"reason": f"{lineage_location.uri} belongs to another job, not {job.arn}"}
            )
        benchmark = store.read_json(output.child(BENCHMARK_JSON))
    except JobFailedError as error:  # S3AccessError, or a file that is not JSON
        logger.warning("dashboard: could not read the results of %s: %s", job.arn, error)
        return results.model_copy(update={"reason": str(error)})
    try:
        table = [_table_row(row) for row in table_rows(benchmark)]
        definitions = metric_definitions_of(benchmark)
        shortfalls = request_shortfalls_of(benchmark)
    except ValueError as error:
        return results.model_copy(update={"reason": f"{output.child(BENCHMARK_JSON).uri}: {error}"})
    return results.model_copy(
        update={
            "available": True,
            "artifacts": _artifacts(lineage),
            "benchmark": table,
            "metric_definitions": definitions,
            "request_shortfalls": shortfalls,
        }
    )


def _artifacts(lineage: dict[str, Any]) -> list[PublishedArtifact]:
    return [
        PublishedArtifact(
            path=str(item.get("path")),
            uri=str(item.get("uri")),
            sha256=item.get("sha256"),
            size=item.get("size"),
        )
        for item in lineage.get("outputs") or []
        if isinstance(item, dict)
    ]


def _table_row(row: Any) -> BenchmarkTableRowShape:
    # table_rows' keys are the console's column titles; ours are the wire's member names.
    return BenchmarkTableRowShape(
        configuration=row["Configuration"],
        concurrency=row["Concurrency"],
        ttft_ms=row["TTFT (ms)"],
        tpot_ms=row["TPOT (ms)"],
        itl_ms=row["ITL (ms)"],
        request_throughput=row["Request Throughput (req/s)"],
        output_throughput=row["Output Throughput (tokens/s)"],
        otps_per_request=row["OTPS per request"],
        acceptance_length=row["Acceptance Length"],
        k=row["K"],
        speedup_vs_no_eagle=row["Speedup vs No EAGLE"],
    )
