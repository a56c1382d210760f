"""Where a job's inputs are on S3: the base model, and an existing EAGLE head (``eagle_model``).

Read from ModelSource.S3, or from the PrimaryContainer of ModelSource.SageMakerModel that
CreateOptimizationJob snapshotted into the job. Either is a directory (an S3 prefix) or a
gzip-compressed tar object (model.tar.gz) that the worker unpacks.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.sagemaker.shapes.optimization_jobs import OptimizationJobModelSource
from core.sagemaker.shapes.sagemaker_models import ContainerDefinition

# SageMaker's channel name for an existing EAGLE head (AdditionalModelDataSources).
EAGLE_MODEL_CHANNEL = "eagle_model"
# A ModelSource.S3.S3Uri or ModelDataUrl ending so names a model.tar.gz, not a directory.
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


def parse_s3_uri(uri: str, *, field: str) -> S3Location:
    try:
        return S3Location.parse(uri, field=field)
    except ValueError as exc:
        raise JobFailedError(str(exc)) from exc


@dataclass(frozen=True)
class ModelData:
    """Where a model's files are: an S3 prefix, or (``compressed``) one gzip-compressed tar object."""

    location: S3Location
    compressed: bool = False

    @property
    def uri(self) -> str:
        return self.location.uri if self.compressed else self.location.as_directory.uri


def is_archive_uri(uri: str) -> bool:
    return uri.endswith(ARCHIVE_SUFFIXES)


def model_location(
    model_source: OptimizationJobModelSource, source_model_container: ContainerDefinition | None
) -> ModelData:
    """The base model's files, from ModelSource (S3 URI or SageMaker model).

    A prefix is read as a model directory; a model.tar.gz (ModelSource.S3.S3Uri or ModelDataUrl
    ending in .tar.gz, or ModelDataSource S3Object + Gzip) is unpacked by the worker.
    """
    if model_source.s3 is not None and model_source.s3.s3_uri:
        uri = model_source.s3.s3_uri
        return ModelData(parse_s3_uri(uri, field="ModelSource.S3.S3Uri"), compressed=is_archive_uri(uri))
    if source_model_container is None:
        raise JobFailedError(
            "ModelSource names neither an S3 URI nor a SageMaker model with a PrimaryContainer"
        )
    model_data_source = source_model_container.model_data_source
    data_source = None if model_data_source is None else model_data_source.s3_data_source
    if data_source is not None:
        return ModelData(
            parse_s3_uri(data_source.s3_uri, field="PrimaryContainer.ModelDataSource.S3DataSource.S3Uri"),
            compressed=_is_compressed(
                data_source.s3_data_type,
                data_source.compression_type,
                what="PrimaryContainer.ModelDataSource.S3DataSource",
            ),
        )
    url = source_model_container.model_data_url
    if url:
        if url.endswith(".tar"):
            raise JobFailedError(
                f"PrimaryContainer.ModelDataUrl {url} is an uncompressed tar archive; use a gzip-compressed "
                "model.tar.gz or an uncompressed directory (ModelDataSource with S3Prefix)"
            )
        return ModelData(
            parse_s3_uri(url, field="PrimaryContainer.ModelDataUrl"), compressed=is_archive_uri(url)
        )
    raise JobFailedError(
        "The SageMaker model's PrimaryContainer has neither ModelDataUrl nor ModelDataSource"
    )


def _is_compressed(data_type: str, compression: str, *, what: str) -> bool:
    """S3Prefix + None is a directory, S3Object + Gzip a model.tar.gz; nothing else is readable."""
    if data_type == "S3Prefix" and compression == "None":
        return False
    if data_type == "S3Object" and compression == "Gzip":
        return True
    raise JobFailedError(
        f"{what} has S3DataType={data_type} CompressionType={compression}; an optimization job reads "
        "an uncompressed directory (S3Prefix, None) or a model.tar.gz (S3Object, Gzip)"
    )


def eagle_head_location(source_model_container: ContainerDefinition | None) -> ModelData | None:
    """The ``eagle_model`` channel (a prefix or a tar.gz), or None; any other channel fails the job.

    An optimization job reads only the base model and an EAGLE head, so a channel it would
    silently ignore (a LoRA adapter, a ``draft_model``) is an error the user should see.
    """
    if source_model_container is None:
        return None
    head: ModelData | None = None
    for index, source in enumerate(source_model_container.additional_model_data_sources or [], 1):
        channel = source.channel_name
        if channel != EAGLE_MODEL_CHANNEL:
            raise JobFailedError(
                f"PrimaryContainer.AdditionalModelDataSources.{index}: channel {channel!r} is not "
                f"supported; an optimization job reads only the '{EAGLE_MODEL_CHANNEL}' channel "
                "(an existing EAGLE-3 head to start from)"
            )
        data = source.s3_data_source
        compressed = _is_compressed(
            data.s3_data_type, data.compression_type, what=f"The {EAGLE_MODEL_CHANNEL} channel"
        )
        head = ModelData(
            parse_s3_uri(
                data.s3_uri,
                field=f"PrimaryContainer.AdditionalModelDataSources.{index}.S3DataSource.S3Uri",
            ),
            compressed=compressed,
        )
    return head
