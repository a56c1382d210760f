"""The output model's container when the job's ModelSource is an S3 URI (a directory or a model.tar.gz)."""

from __future__ import annotations

import pytest

from core.job_spec import JobSpec
from core.s3 import S3Location
from tests.factories.optimization_jobs import create_optimization_job_request, unsaved_job_row
from worker.output_model import output_model_request


def _spec(model_uri: str) -> JobSpec:
    request = create_optimization_job_request(ModelSource={"S3": {"S3Uri": model_uri}})
    return JobSpec.from_row(unsaved_job_row(request))


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
