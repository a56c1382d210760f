"""Reading a job's published results back from S3: only a lineage.json of this very job counts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy.orm import Session

from api.dashboard.published_results import read_job_results
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.role import RoleCredentials
from db.settings import Settings
from stack.seaweedfs import S3Endpoint
from tests.factories.accounts import TEST_ROLE_S3_CREDENTIALS, create_account
from tests.factories.optimization_jobs import create_optimization_job


def benchmark_row(configuration: str, concurrency: int, throughput: float) -> dict[str, Any]:
    """A row as a job's serving benchmark publishes it in results.json."""
    return {
        "configuration": configuration,
        "concurrency": concurrency,
        "head_dir": None,
        "ttft_ms": 10.0,
        "tpot_ms": 5.0,
        "itl_ms": 10.0,
        "request_throughput": 1.5,
        "output_throughput": throughput,
        "otps_per_request": 50.0,
        "mean_acceptance_length": None if configuration == "No EAGLE" else 2.5,
    }


@pytest.fixture
def settings(seaweedfs: S3Endpoint) -> Settings:
    return Settings(
        s3_endpoint_url=seaweedfs.endpoint_url,
        s3_access_key_id=seaweedfs.access_key_id,
        s3_secret_access_key=seaweedfs.secret_access_key,
        default_region=seaweedfs.region,
    )


@pytest.fixture
def job(db_session: Session, s3_bucket: str) -> OptimizationJob:
    owner = create_account(db_session)
    return create_optimization_job(
        db_session,
        account_id=owner.account_id,
        aws_account_id=owner.aws_account_id,
        output_config={"S3OutputLocation": f"s3://{s3_bucket}/out"},
        status=Status.COMPLETED,
    )


def role_of(job: OptimizationJob) -> RoleCredentials:
    """The credentials of the job's role (every test account's role stands for the test S3 key)."""
    return RoleCredentials(job.role_arn, *TEST_ROLE_S3_CREDENTIALS)


def test_results_of_a_job_whose_role_is_gone_are_not_read(job: OptimizationJob, settings: Settings) -> None:
    results = read_job_results(job, settings=settings, role=None)
    assert not results.available
    assert results.reason == f"the job's role {job.role_arn} is no longer registered to the account"


def put_json(s3_client: Any, bucket: str, key: str, document: Any) -> None:
    s3_client.put_object(Bucket=bucket, Key=key, Body=json.dumps(document).encode())


def test_no_lineage_means_no_results(job: OptimizationJob, settings: Settings, s3_bucket: str) -> None:
    results = read_job_results(job, settings=settings, role=role_of(job))
    assert results.available is False
    assert results.output_location == f"s3://{s3_bucket}/out/"
    assert results.reason == f"s3://{s3_bucket}/out/lineage.json does not exist (yet)"


def test_a_lineage_of_another_job_is_not_this_jobs_result(
    job: OptimizationJob, settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    put_json(
        s3_client, s3_bucket, "out/lineage.json", {"job": {"arn": "arn:aws:sagemaker:x:1:optimization-job/y"}}
    )
    results = read_job_results(job, settings=settings, role=role_of(job))
    assert results.available is False
    assert results.reason == f"s3://{s3_bucket}/out/lineage.json belongs to another job, not {job.arn}"


def test_published_results_give_the_table_and_every_artifact(
    job: OptimizationJob, settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    outputs = [
        {
            "path": "eagle_model/model.safetensors",
            "uri": f"s3://{s3_bucket}/out/eagle_model/model.safetensors",
        }
    ]
    put_json(s3_client, s3_bucket, "out/lineage.json", {"job": {"arn": job.arn}, "outputs": outputs})
    rows = [benchmark_row("No EAGLE", 1, 100.0), benchmark_row("Trained EAGLE", 1, 180.0)]
    shortfalls = ["Trained EAGLE at concurrency 1: 3 of 4 requests measured (1 errored)"]
    document = {"rows": rows, "request_shortfalls": shortfalls}
    put_json(s3_client, s3_bucket, "out/benchmark/results.json", document)
    results = read_job_results(job, settings=settings, role=role_of(job))
    assert results.available is True
    assert results.request_shortfalls == shortfalls
    assert [(a.path, a.uri) for a in results.artifacts] == [(outputs[0]["path"], outputs[0]["uri"])]
    table = [
        (r.configuration, r.output_throughput, r.tpot_ms, r.acceptance_length) for r in results.benchmark
    ]
    assert table == [("No EAGLE", 100.0, 5.0, None), ("Trained EAGLE", 180.0, 5.0, 2.5)]


def test_a_broken_results_file_is_named(
    job: OptimizationJob, settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    put_json(s3_client, s3_bucket, "out/lineage.json", {"job": {"arn": job.arn}, "outputs": []})
    s3_client.put_object(Bucket=s3_bucket, Key="out/benchmark/results.json", Body=b"{not json")
    results = read_job_results(job, settings=settings, role=role_of(job))
    assert results.available is False
    assert results.reason is not None
    assert f"s3://{s3_bucket}/out/benchmark/results.json is not valid JSON" in results.reason
