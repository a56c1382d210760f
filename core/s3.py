"""The worker's S3 client and S3 URI handling (SeaweedFS in development, any S3 in production)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from db.settings import Settings

# botocore's "standard" retry mode backs off exponentially (with jitter) on throttling,
# 5xx answers and connection errors; after the last attempt the error reaches the stage,
# which fails the job naming the object and the S3 error.
S3_MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str, *, field: str) -> S3Location:
        """Split ``s3://bucket/key``; ``field`` names the request member in the error message."""
        if not uri.startswith("s3://"):
            raise ValueError(f"{field} must be an s3:// URI, got {uri!r}")
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        if not bucket:
            raise ValueError(f"{field} names no bucket: {uri!r}")
        return cls(bucket=bucket, key=key)

    def child(self, name: str) -> S3Location:
        return S3Location(self.bucket, self.prefix + name)

    @property
    def prefix(self) -> str:
        """The key as a directory prefix: empty (the bucket root) or ending in '/'."""
        return self.key if not self.key or self.key.endswith("/") else self.key + "/"

    @property
    def as_directory(self) -> S3Location:
        return S3Location(self.bucket, self.prefix)

    @property
    def name(self) -> str:
        """The last path segment of the key."""
        return self.key.rstrip("/").rsplit("/", 1)[-1]

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def s3_client(
    settings: Settings, *, region: str | None = None, credentials: tuple[str, str] | None = None
) -> Any:
    """A boto3 S3 client for the configured endpoint.

    ``credentials`` (key id, secret) are a job role's; without them the client is the
    service's own identity (EAGLENEST_S3_*, or boto3's chain when unset), which operator
    commands use and a job never does.
    """
    key_id: str | None
    secret_value: str | None
    if credentials is not None:
        key_id, secret_value = credentials
    else:
        secret = settings.s3_secret_access_key
        key_id = settings.s3_access_key_id
        secret_value = None if secret is None else secret.get_secret_value()
    return boto3.client(
        "s3",
        endpoint_url=settings.s3_endpoint_url,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret_value,
        region_name=region or settings.default_region,
        # Path-style addressing: SeaweedFS and most self-hosted stores have no bucket DNS names.
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"},
        ),
    )
