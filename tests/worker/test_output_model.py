"""The output model's container when the job's ModelSource is an S3 URI (a directory or a model.tar.gz)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.job_spec import JobSpec
from core.s3 import S3Location
from core.sagemaker.shapes.optimization_jobs import CreateOptimizationJobRequest
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus
from tests.factories.optimization_jobs import create_optimization_job_request
from worker.output_model import output_model_request


def _spec(model_uri: str) -> JobSpec:
    request = CreateOptimizationJobRequest.model_validate(
        create_optimization_job_request(ModelSource={"S3": {"S3Uri": model_uri}})
    )
    row = OptimizationJob(
        id=7,
        account_id=3,
        name="job",
        region="us-west-2",
        arn="arn:aws:sagemaker:us-west-2:111122223333:optimization-job/job",
        role_arn="arn:aws:iam::111122223333:role/SageMakerRole",
        status=OptimizationJobStatus.INPROGRESS,
        started_at=None,
        created_at=datetime(2025, 1, 2, tzinfo=UTC),
        model_source=request.model_source.to_wire(),
        optimization_environment=request.optimization_environment,
        optimization_configs=[config.to_wire() for config in request.optimization_configs],
        output_config=request.output_config.to_wire(),
        stopping_condition=request.stopping_condition.to_wire(),
        source_model_container=None,
    )
    return JobSpec.from_row(row)


@pytest.mark.parametrize(
    ("uri", "data_type", "compression"),
    [("s3://b/m/", "S3Prefix", "None"), ("s3://b/m/model.tar.gz", "S3Object", "Gzip")],
)
def test_the_output_model_reads_the_base_model_as_the_job_did(
    uri: str, data_type: str, compression: str
) -> None:
    body = output_model_request(
        _spec(uri),
        name="out",
        base_model=S3Location.parse(uri, field="x"),
        head_uri="s3://b/out/eagle_model/",
        image="i",
    )
    source = body["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source == {"S3Uri": uri, "S3DataType": data_type, "CompressionType": compression}
