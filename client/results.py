"""``download_results``: a finished job's head, benchmark, metrics and lineage, checked against lineage.json.

The worker writes lineage.json last, listing every published file with its sha256 and
size, so it is both the commit marker and the manifest: a location without it (or whose
lineage names another job) holds no complete result of this job.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from client.connection import resolve_client_settings
from client.errors import (
    ChecksumMismatch,
    ChecksumMismatchError,
    IncompleteOutputError,
    OptimizationJobNotFinishedError,
    OptimizationJobNotFoundError,
)
from client.rest import client_credentials

LINEAGE = "lineage.json"
HEAD_DIR = "eagle_model"
BENCHMARK_JSON = "benchmark/results.json"
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class DownloadedResults:
    directory: Path
    output_uri: str
    description: dict[str, Any]  # DescribeOptimizationJob of the job
    lineage: dict[str, Any]
    files: dict[str, Path]  # every verified file, by its path relative to S3OutputLocation

    @property
    def head_dir(self) -> Path:
        return self.directory / HEAD_DIR

    @property
    def benchmark_json(self) -> Path:
        return self.directory / BENCHMARK_JSON


def download_results(
    client: Any, name: str, dest: str | Path, *, s3_endpoint_url: str | None = None, s3_client: Any = None
) -> DownloadedResults:
    """Download job ``name``'s published outputs into ``dest``, verifying each file's sha256.

    S3 is reached with the SageMaker client's credentials and region, at ``s3_endpoint_url``,
    else the endpoint the client was made with (EAGLENEST_S3_ENDPOINT_URL, AWS_ENDPOINT_URL_S3,
    stack.json), else AWS S3. Files whose checksum differs are deleted and named in a
    ChecksumMismatchError; lineage.json is written to ``dest`` only when every file matched.
    """
    description = _finished_job(client, name)
    bucket, prefix = _split(str(description["OutputConfig"]["S3OutputLocation"]))
    output_uri = f"s3://{bucket}/{prefix}"
    s3 = s3_client if s3_client is not None else _s3_client(client, s3_endpoint_url)
    lineage = _read_lineage(s3, bucket, prefix, output_uri, description)
    directory = Path(dest)
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    mismatches: list[ChecksumMismatch] = []
    for entry in _outputs(lineage, output_uri):
        relative = entry["path"]
        local = _local_path(directory, relative, output_uri)
        sha256, size = _download(s3, bucket, prefix + relative, local, output_uri)
        if sha256 != entry["sha256"] or size != entry.get("size", size):
            local.unlink()
            mismatches.append(ChecksumMismatch(relative, entry["sha256"], sha256, entry.get("size"), size))
        else:
            files[relative] = local
    if mismatches:
        raise ChecksumMismatchError(output_uri, mismatches)
    lineage_path = directory / LINEAGE
    lineage_path.write_text(json.dumps(lineage, indent=2) + "\n", encoding="utf-8")
    files[LINEAGE] = lineage_path
    return DownloadedResults(directory, output_uri, description, lineage, files)


def _finished_job(client: Any, name: str) -> dict[str, Any]:
    try:
        description: dict[str, Any] = client.describe_optimization_job(OptimizationJobName=name)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFound":
            raise OptimizationJobNotFoundError(name, client.meta.endpoint_url) from None
        raise
    status = description["OptimizationJobStatus"]
    if status == "COMPLETED":
        return description
    if status == "FAILED":
        detail = f"it published no results (FailureReason: {description.get('FailureReason')})"
    elif status == "STOPPED":
        detail = "it was stopped before publishing results"
    else:
        detail = "results are published when it is COMPLETED; wait_for_job(client, name) waits for that"
    raise OptimizationJobNotFinishedError(name, status, detail)


def _s3_client(client: Any, s3_endpoint_url: str | None) -> Any:
    endpoint = s3_endpoint_url
    if endpoint is None:
        settings = getattr(client, "eaglenest_settings", None)
        endpoint = (
            settings.s3_endpoint_url
            if settings is not None
            else resolve_client_settings(endpoint_url=client.meta.endpoint_url).s3_endpoint_url
        )
    frozen = client_credentials(client).get_frozen_credentials()
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=client.meta.region_name,
        aws_access_key_id=frozen.access_key,
        aws_secret_access_key=frozen.secret_key,
        aws_session_token=frozen.token,
        # S3-compatible stores (SeaweedFS, MinIO) answer on one host name; AWS accepts both.
        config=Config(s3={"addressing_style": "path"}) if endpoint else None,
    )


def _read_lineage(
    s3: Any, bucket: str, prefix: str, output_uri: str, description: dict[str, Any]
) -> dict[str, Any]:
    try:
        body = s3.get_object(Bucket=bucket, Key=prefix + LINEAGE)["Body"].read()
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            raise IncompleteOutputError(
                f"{output_uri}{LINEAGE} does not exist: the output location holds no committed result "
                f"of job {description['OptimizationJobName']!r}"
            ) from None
        raise
    try:
        lineage: dict[str, Any] = json.loads(body)
    except ValueError as error:
        raise IncompleteOutputError(f"{output_uri}{LINEAGE} is not JSON: {error}") from None
    arn = (lineage.get("job") or {}).get("arn")
    if arn != description["OptimizationJobArn"]:
        raise IncompleteOutputError(
            f"{output_uri}{LINEAGE} belongs to job {arn!r}, not {description['OptimizationJobArn']!r}: "
            "another job has published to this location since"
        )
    return lineage


def _outputs(lineage: dict[str, Any], output_uri: str) -> list[dict[str, Any]]:
    outputs = lineage.get("outputs")
    if not isinstance(outputs, list) or not outputs:
        raise IncompleteOutputError(f"{output_uri}{LINEAGE}: 'outputs' lists no files")
    for index, entry in enumerate(outputs):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise IncompleteOutputError(f"{output_uri}{LINEAGE}: outputs[{index}] has no 'path'")
        if not isinstance(entry.get("sha256"), str):
            raise IncompleteOutputError(
                f"{output_uri}{LINEAGE}: outputs[{index}] ({entry['path']}) has no 'sha256'"
            )
    return outputs


def _local_path(directory: Path, relative: str, output_uri: str) -> Path:
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or ".." in parts:
        # lineage.json is data from S3: never let it write outside dest.
        raise IncompleteOutputError(
            f"{output_uri}{LINEAGE}: output path {relative!r} leaves the output location"
        )
    local = directory.joinpath(*parts)
    local.parent.mkdir(parents=True, exist_ok=True)
    return local


def _download(s3: Any, bucket: str, key: str, local: Path, output_uri: str) -> tuple[str, int]:
    """Stream the object to ``local``; returns its sha256 and size."""
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            raise IncompleteOutputError(
                f"s3://{bucket}/{key} is listed in {output_uri}{LINEAGE} but does not exist"
            ) from None
        raise
    digest = hashlib.sha256()
    size = 0
    with local.open("wb") as handle:
        for chunk in iter(lambda: body.read(CHUNK_BYTES), b""):
            digest.update(chunk)
            size += len(chunk)
            handle.write(chunk)
    return digest.hexdigest(), size


def _split(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise IncompleteOutputError(f"OutputConfig.S3OutputLocation is not an s3:// URI: {uri!r}")
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key if not key or key.endswith("/") else key + "/"
