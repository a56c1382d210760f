"""Where a job's model and EAGLE head lie (core.model_source): from ModelSource.S3 or a
SageMaker model's container, compressed or not, and what cannot be trained on, named by field."""

from __future__ import annotations

from typing import Any

import pytest

from core.job_errors import JobFailedError
from core.model_source import ModelData, eagle_head_location, model_location
from core.s3 import S3Location
from core.sagemaker.shapes.optimization_jobs import OptimizationJobModelSource
from core.sagemaker.shapes.sagemaker_models import ContainerDefinition


def _location(model_source: dict[str, Any], container: dict[str, Any] | None) -> ModelData:
    """model_location of the members as a job row stores them (PascalCase JSON)."""
    return model_location(
        OptimizationJobModelSource.model_validate(model_source),
        None if container is None else ContainerDefinition.model_validate(container),
    )


def _s3_data_source(uri: str, compression: str, data_type: str = "S3Prefix") -> dict[str, Any]:
    return {"S3DataSource": {"S3Uri": uri, "S3DataType": data_type, "CompressionType": compression}}


def test_model_location_from_an_s3_uri() -> None:
    assert _location({"S3": {"S3Uri": "s3://models/llama/"}}, None) == ModelData(
        S3Location("models", "llama/")
    )


def test_model_location_from_a_sagemaker_models_uncompressed_data_source() -> None:
    container = {"ModelDataSource": _s3_data_source("s3://b/m/", "None")}
    assert _location({"SageMakerModel": {"ModelName": "m"}}, container) == ModelData(S3Location("b", "m/"))


def test_model_location_from_a_model_data_url_directory() -> None:
    container = {"ModelDataUrl": "s3://b/dir/"}
    assert _location({"SageMakerModel": {"ModelName": "m"}}, container) == ModelData(S3Location("b", "dir/"))


@pytest.mark.parametrize(
    ("model_source", "container"),
    [
        ({"S3": {"S3Uri": "s3://b/m/model.tar.gz"}}, None),
        ({"SageMakerModel": {"ModelName": "m"}}, {"ModelDataUrl": "s3://b/m/model.tar.gz"}),
        (
            {"SageMakerModel": {"ModelName": "m"}},
            {"ModelDataSource": _s3_data_source("s3://b/m/model.tar.gz", "Gzip", "S3Object")},
        ),
    ],
)
def test_model_location_of_a_model_tar_gz_is_compressed(
    model_source: dict[str, Any], container: dict[str, Any] | None
) -> None:
    assert _location(model_source, container) == ModelData(S3Location("b", "m/model.tar.gz"), compressed=True)


def test_an_eagle_model_channel_may_be_a_tar_gz_but_not_a_gzip_prefix() -> None:
    def head(data_type: str, compression: str) -> ModelData | None:
        source = {
            "ChannelName": "eagle_model",
            **_s3_data_source("s3://b/head.tar.gz", compression, data_type),
        }
        return eagle_head_location(
            ContainerDefinition.model_validate({"AdditionalModelDataSources": [source]})
        )

    assert head("S3Object", "Gzip") == ModelData(S3Location("b", "head.tar.gz"), compressed=True)
    assert head("S3Prefix", "None") == ModelData(S3Location("b", "head.tar.gz"))
    for data_type, compression in (("S3Prefix", "Gzip"), ("S3Object", "None")):
        with pytest.raises(JobFailedError, match=f"S3DataType={data_type} CompressionType={compression}"):
            head(data_type, compression)


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"ModelDataUrl": "s3://b/model.tar"}, "is an uncompressed tar archive"),
        (
            {"ModelDataSource": _s3_data_source("s3://b/m/", "Gzip")},
            "S3DataType=S3Prefix CompressionType=Gzip; an optimization job reads an uncompressed directory",
        ),
        (
            {"ModelDataSource": _s3_data_source("s3://b/m.bin", "None", "S3Object")},
            "S3DataType=S3Object CompressionType=None",
        ),
        ({"Image": "x"}, "neither ModelDataUrl nor ModelDataSource"),
        (None, "neither an S3 URI nor a SageMaker model"),
    ],
)
def test_model_location_rejects_what_cannot_be_trained_on(
    container: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(JobFailedError, match=message):
        _location({"SageMakerModel": {"ModelName": "m"}}, container)


def test_model_location_rejects_a_non_s3_uri_naming_the_field() -> None:
    with pytest.raises(JobFailedError, match=r"ModelSource.S3.S3Uri must be an s3:// URI, got 'https://x/y'"):
        _location({"S3": {"S3Uri": "https://x/y"}}, None)
