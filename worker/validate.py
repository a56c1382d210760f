"""Stage 'validate': the base model the job names really is a Hugging Face model directory on S3.

Checked before anything heavy runs, so a wrong S3 URI fails in seconds with a FailureReason
that names the object that is missing, not hours later inside training.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from worker.context import JobContext
from worker.errors import JobFailedError
from worker.s3 import S3Location, s3_client

MAX_CONFIG_BYTES = 1_000_000
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def model_location(model_source: dict[str, Any], source_model_container: dict[str, Any] | None) -> S3Location:
    """The S3 prefix holding the base model's files, from ModelSource (S3 URI or SageMaker model)."""
    s3_source = model_source.get("S3")
    if s3_source and s3_source.get("S3Uri"):
        return _parse(s3_source["S3Uri"], field="ModelSource.S3.S3Uri")
    if source_model_container is None:
        raise JobFailedError(
            "ModelSource names neither an S3 URI nor a SageMaker model with a PrimaryContainer"
        )
    data_source = (source_model_container.get("ModelDataSource") or {}).get("S3DataSource")
    if data_source:
        if data_source.get("CompressionType", "None") != "None":
            raise JobFailedError(
                "PrimaryContainer.ModelDataSource.S3DataSource.CompressionType must be None: "
                "the model must be an uncompressed directory on S3"
            )
        return _parse(data_source["S3Uri"], field="PrimaryContainer.ModelDataSource.S3DataSource.S3Uri")
    url = source_model_container.get("ModelDataUrl")
    if url:
        if url.endswith((".tar.gz", ".tgz", ".tar")):
            raise JobFailedError(
                f"PrimaryContainer.ModelDataUrl {url} is an archive; register the model as an "
                "uncompressed directory (ModelDataSource.S3DataSource with CompressionType None)"
            )
        return _parse(url, field="PrimaryContainer.ModelDataUrl")
    raise JobFailedError(
        "The SageMaker model's PrimaryContainer has neither ModelDataUrl nor ModelDataSource"
    )


def validate_artifacts(ctx: JobContext) -> None:
    location = model_location(ctx.job.model_source, ctx.job.source_model_container)
    client = s3_client(ctx.settings, region=ctx.job.region)
    config_location = location.child("config.json")
    ctx.report(f"Checking the model config at {config_location.uri}", fraction=0.1)
    config = _read_json(client, config_location)
    if "model_type" not in config and "architectures" not in config:
        raise JobFailedError(
            f"{config_location.uri} is not a Hugging Face model config (no model_type or architectures)"
        )
    ctx.check()
    ctx.report(f"Looking for model weights under {location.uri}", fraction=0.5)
    if not _has_weights(client, location):
        raise JobFailedError(f"No model weights (*.safetensors or *.bin) under {location.uri}")
    ctx.report(f"Model artifacts found at {location.uri}", fraction=1.0)


def _parse(uri: str, *, field: str) -> S3Location:
    try:
        return S3Location.parse(uri, field=field)
    except ValueError as exc:
        raise JobFailedError(str(exc)) from exc


def _read_json(client: Any, location: S3Location) -> dict[str, Any]:
    try:
        head = client.head_object(Bucket=location.bucket, Key=location.key)
        if head["ContentLength"] > MAX_CONFIG_BYTES:
            raise JobFailedError(
                f"{location.uri} is {head['ContentLength']} bytes; a model config is far smaller"
            )
        body = client.get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
    except ClientError as exc:
        raise JobFailedError(_describe_s3_error(exc, location)) from exc
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise JobFailedError(f"{location.uri} is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise JobFailedError(f"{location.uri} must hold a JSON object")
    return document


def _has_weights(client: Any, location: S3Location) -> bool:
    prefix = location.child("").key
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix)
        return any(
            item["Key"].endswith(WEIGHT_SUFFIXES) for page in pages for item in page.get("Contents", [])
        )
    except ClientError as exc:
        raise JobFailedError(_describe_s3_error(exc, location)) from exc


def _describe_s3_error(exc: ClientError, location: S3Location) -> str:
    code = exc.response.get("Error", {}).get("Code", "Unknown")
    if code in {"404", "NoSuchKey", "NotFound"}:
        return f"Model file not found: {location.uri}"
    if code == "NoSuchBucket":
        return f"S3 bucket {location.bucket} does not exist ({location.uri})"
    if code in {"403", "AccessDenied"}:
        return f"Access denied reading {location.uri}"
    return f"Could not read {location.uri}: {code} {exc.response.get('Error', {}).get('Message', '')}".strip()
