"""Every S3 call the pipeline makes, with S3 failures turned into FailureReasons.

A stage that cannot read or write an object fails the job with a message naming the
object's URI and the S3 error, after botocore's own retries (see ``core.s3``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import BotoCoreError, ClientError

from core.job_errors import JobFailedError
from core.s3 import S3Location

logger = logging.getLogger(__name__)
_Answer = TypeVar("_Answer")

NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
# A conditional write lost to another writer: the object was not as the condition said (412),
# or another conditional write to it was in flight (409, AWS S3).
LOST_RACE_CODES = frozenset({"412", "PreconditionFailed", "409", "ConditionalRequestConflict"})
# Transfers run on the stage's own thread: the monitor's interrupt (a signal handled in the
# main thread) can then cut a long download short, which it could not do inside a pool.
_TRANSFER = TransferConfig(use_threads=False)


class S3AccessError(JobFailedError):
    """An S3 request failed for good; the message names the object and S3's error."""


@dataclass(frozen=True)
class S3Object:
    """One object as listed: where it is and which version (ETag) it was."""

    location: S3Location
    etag: str
    size: int
    last_modified: datetime

    @property
    def uri(self) -> str:
        return self.location.uri


def describe_s3_error(error: ClientError | BotoCoreError, *, action: str, uri: str) -> str:
    if isinstance(error, BotoCoreError):
        return f"S3 error {action} {uri}: {error}"
    details = error.response.get("Error", {})
    code = str(details.get("Code", "Unknown"))
    if code in NOT_FOUND_CODES:
        return f"S3 object not found: {uri}"
    if code == "NoSuchBucket":
        return f"S3 bucket does not exist: {uri}"
    if code in {"403", "AccessDenied"}:
        return f"S3 access denied {action} {uri}"
    message = str(details.get("Message", "")).strip()
    return f"S3 error {action} {uri}: {code}" + (f" ({message})" if message else "")


@contextmanager
def s3_errors(*, action: str, uri: str) -> Iterator[None]:
    """Turn a final S3 failure into S3AccessError naming ``uri``."""
    try:
        yield
    except (ClientError, BotoCoreError) as error:
        raise S3AccessError(describe_s3_error(error, action=action, uri=uri)) from error


def is_not_found(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code", "")) in NOT_FOUND_CODES


class S3Store:
    """The pipeline's S3 operations on one client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def list_objects(self, prefix: S3Location) -> list[S3Object]:
        """Every object under ``prefix`` (as a directory), in key order; folder markers skipped."""
        directory = prefix.as_directory
        found: list[S3Object] = []
        with s3_errors(action="listing", uri=directory.uri):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=directory.bucket, Prefix=directory.key
            )
            for page in pages:
                for item in page.get("Contents", []):
                    if item["Key"].endswith("/"):
                        continue
                    found.append(
                        S3Object(
                            location=S3Location(directory.bucket, item["Key"]),
                            etag=_etag(item["ETag"]),
                            size=int(item["Size"]),
                            last_modified=item["LastModified"],
                        )
                    )
        return sorted(found, key=lambda obj: obj.location.key)

    def head(self, location: S3Location) -> S3Object | None:
        """The object's version and size, or None when it does not exist."""
        answer = _unless_missing(
            location, lambda: self.client.head_object(Bucket=location.bucket, Key=location.key)
        )
        if answer is None:
            return None
        return S3Object(
            location=location,
            etag=_etag(answer["ETag"]),
            size=int(answer["ContentLength"]),
            last_modified=answer["LastModified"],
        )

    def read_bytes(self, location: S3Location) -> bytes:
        with s3_errors(action="reading", uri=location.uri):
            body: bytes = self.client.get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
        return body

    def read_versioned(self, location: S3Location) -> tuple[bytes, str] | None:
        """The object's body and the ETag of that very version, or None when it does not exist."""

        def body_and_etag() -> tuple[bytes, str]:
            answer = self.client.get_object(Bucket=location.bucket, Key=location.key)
            return answer["Body"].read(), _etag(answer["ETag"])

        return _unless_missing(location, body_and_etag)

    def read_json(self, location: S3Location) -> Any:
        body = self.read_bytes(location)
        try:
            return json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise JobFailedError(f"{location.uri} is not valid JSON: {error}") from error

    def download(
        self, location: S3Location, path: Path, *, progress: Callable[[int], None] | None = None
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with s3_errors(action="downloading", uri=location.uri):
            self.client.download_file(
                location.bucket, location.key, str(path), Callback=progress, Config=_TRANSFER
            )

    def upload_file(self, path: Path, location: S3Location) -> None:
        with s3_errors(action="uploading", uri=location.uri):
            self.client.upload_file(str(path), location.bucket, location.key, Config=_TRANSFER)

    def put_bytes(self, body: bytes, location: S3Location, *, content_type: str | None = None) -> None:
        extra = {"ContentType": content_type} if content_type else {}
        with s3_errors(action="writing", uri=location.uri):
            self.client.put_object(Bucket=location.bucket, Key=location.key, Body=body, **extra)

    def put_bytes_if(self, body: bytes, location: S3Location, *, replacing: str | None) -> str | None:
        """Write only over the version with ETag ``replacing`` (with None: only where no object
        is yet), as one atomic S3 conditional write. Returns the new ETag, or None when the
        object had changed: of two writers racing on one version exactly one succeeds."""
        condition = {"IfMatch": f'"{replacing}"'} if replacing is not None else {"IfNoneMatch": "*"}
        try:
            answer = self.client.put_object(Bucket=location.bucket, Key=location.key, Body=body, **condition)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code in LOST_RACE_CODES or (replacing is not None and is_not_found(error)):
                return None
            raise S3AccessError(describe_s3_error(error, action="writing", uri=location.uri)) from error
        except BotoCoreError as error:
            raise S3AccessError(describe_s3_error(error, action="writing", uri=location.uri)) from error
        return _etag(answer["ETag"])

    def put_json(self, document: Any, location: S3Location) -> None:
        body = (json.dumps(document, indent=2, sort_keys=False) + "\n").encode()
        self.put_bytes(body, location, content_type="application/json")

    def copy(self, source: S3Location, destination: S3Location) -> None:
        """Server-side copy (multipart for large objects)."""
        with s3_errors(action="copying to", uri=destination.uri):
            self.client.copy(
                {"Bucket": source.bucket, "Key": source.key},
                destination.bucket,
                destination.key,
                Config=_TRANSFER,
            )

    def delete(self, location: S3Location) -> None:
        with s3_errors(action="deleting", uri=location.uri):
            self.client.delete_object(Bucket=location.bucket, Key=location.key)

    def delete_prefix(self, prefix: S3Location) -> int:
        """Delete every object under ``prefix``; returns how many there were."""
        objects = self.list_objects(prefix)
        for start in range(0, len(objects), 1000):
            batch = objects[start : start + 1000]
            with s3_errors(action="deleting under", uri=prefix.uri):
                self.client.delete_objects(
                    Bucket=prefix.bucket,
                    Delete={"Objects": [{"Key": obj.location.key} for obj in batch], "Quiet": True},
                )
        return len(objects)

    def ensure_bucket(self, bucket: str) -> None:
        """Create the bucket unless it exists (operator commands; jobs never create buckets)."""
        try:
            self.client.head_bucket(Bucket=bucket)
            return
        except ClientError as error:
            if not is_not_found(error) and error.response.get("Error", {}).get("Code") != "NoSuchBucket":
                raise S3AccessError(
                    describe_s3_error(error, action="reading", uri=f"s3://{bucket}")
                ) from error
        with s3_errors(action="creating", uri=f"s3://{bucket}"):
            self.client.create_bucket(Bucket=bucket)


def _unless_missing(location: S3Location, read: Callable[[], _Answer]) -> _Answer | None:
    """``read()``, or None when S3 says the object does not exist; other failures name it."""
    try:
        return read()
    except ClientError as error:
        if is_not_found(error):
            return None
        raise S3AccessError(describe_s3_error(error, action="reading", uri=location.uri)) from error
    except BotoCoreError as error:
        raise S3AccessError(describe_s3_error(error, action="reading", uri=location.uri)) from error


def _etag(raw: str) -> str:
    return raw.strip('"')
