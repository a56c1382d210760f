"""Test buckets that clean up after themselves.

Why the buckets are deleted: SeaweedFS gives every bucket its own collection and at least one
volume, and a volume server holds only free-disk / volume-size volumes. A suite that leaves
hundreds of buckets behind runs out of volumes, and late tests fail with PutObject
InternalError.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError


@contextmanager
def temporary_bucket(s3_client: Any, *, prefix: str) -> Iterator[str]:
    """A fresh bucket that is emptied and deleted on exit, which frees its SeaweedFS volume."""
    name = f"{prefix}-{uuid.uuid4().hex[:20]}"
    s3_client.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        try:
            delete_bucket_and_contents(s3_client, name)
        except ClientError as error:
            # A worker still finishing a job may write after the test ends; the bucket then
            # stays, which costs one volume, not a test result.
            warnings.warn(f"could not delete test bucket {name}: {error}", stacklevel=2)


def delete_bucket_and_contents(s3_client: Any, bucket: str) -> None:
    paginator = s3_client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            s3_client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    s3_client.delete_bucket(Bucket=bucket)
