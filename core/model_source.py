"""Where a job's inputs are on S3: the base model, and an existing EAGLE head (``eagle_model``).

Read from ModelSource.S3, or from the PrimaryContainer of ModelSource.SageMakerModel that
CreateOptimizationJob snapshotted into the job.
"""

from __future__ import annotations

from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.sagemaker.shapes.optimization_jobs import OptimizationJobModelSource
from core.sagemaker.shapes.sagemaker_models import ContainerDefinition

# SageMaker's channel name for an existing EAGLE head (AdditionalModelDataSources).
EAGLE_MODEL_CHANNEL = "eagle_model"


def parse_s3_uri(uri: str, *, field: str) -> S3Location:
    try:
        return S3Location.parse(uri, field=field)
    except ValueError as exc:
        raise JobFailedError(str(exc)) from exc


def model_location(
    model_source: OptimizationJobModelSource, source_model_container: ContainerDefinition | None
) -> S3Location:
    """The S3 prefix holding the base model's files, from ModelSource (S3 URI or SageMaker model)."""
    if model_source.s3 is not None and model_source.s3.s3_uri:
        return parse_s3_uri(model_source.s3.s3_uri, field="ModelSource.S3.S3Uri")
    if source_model_container is None:
        raise JobFailedError(
            "ModelSource names neither an S3 URI nor a SageMaker model with a PrimaryContainer"
        )
    model_data_source = source_model_container.model_data_source
    data_source = None if model_data_source is None else model_data_source.s3_data_source
    if data_source is not None:
        if data_source.compression_type != "None":
            raise JobFailedError(
                "PrimaryContainer.ModelDataSource.S3DataSource.CompressionType must be None: "
                "the model must be an uncompressed directory on S3"
            )
        return parse_s3_uri(data_source.s3_uri, field="PrimaryContainer.ModelDataSource.S3DataSource.S3Uri")
    url = source_model_container.model_data_url
    if url:
        if url.endswith((".tar.gz", ".tgz", ".tar")):
            raise JobFailedError(
                f"PrimaryContainer.ModelDataUrl {url} is an archive; register the model as an "
                "uncompressed directory (ModelDataSource.S3DataSource with CompressionType None)"
            )
        return parse_s3_uri(url, field="PrimaryContainer.ModelDataUrl")
    raise JobFailedError(
        "The SageMaker model's PrimaryContainer has neither ModelDataUrl nor ModelDataSource"
    )


def eagle_head_location(source_model_container: ContainerDefinition | None) -> S3Location | None:
    """The ``eagle_model`` channel's S3 prefix, or None; any other channel fails the job.

    An optimization job reads only the base model and an EAGLE head, so a channel it would
    silently ignore (a LoRA adapter, a ``draft_model``) is an error the user should see.
    """
    if source_model_container is None:
        return None
    head: S3Location | None = None
    for index, source in enumerate(source_model_container.additional_model_data_sources or [], 1):
        channel = source.channel_name
        if channel != EAGLE_MODEL_CHANNEL:
            raise JobFailedError(
                f"PrimaryContainer.AdditionalModelDataSources.{index}: channel {channel!r} is not "
                f"supported; an optimization job reads only the '{EAGLE_MODEL_CHANNEL}' channel "
                "(an existing EAGLE-3 head to start from)"
            )
        data = source.s3_data_source
        if data.compression_type != "None" or data.s3_data_type != "S3Prefix":
            raise JobFailedError(
                f"The {EAGLE_MODEL_CHANNEL} channel must be an uncompressed S3Prefix directory, got "
                f"S3DataType={data.s3_data_type} CompressionType={data.compression_type}"
            )
        head = parse_s3_uri(
            data.s3_uri,
            field=f"PrimaryContainer.AdditionalModelDataSources.{index}.S3DataSource.S3Uri",
        )
    return head
