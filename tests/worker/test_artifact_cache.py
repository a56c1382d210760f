"""The ETag-keyed local cache against a real SeaweedFS."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.s3_store import S3Store
from worker.artifact_cache import SNAPSHOT_FILE, ArtifactCache
from worker.s3_snapshot import S3Snapshot, safe_relative_path


def _snapshot(store: S3Store, bucket: str, prefix: str) -> S3Snapshot:
    location = S3Location(bucket, prefix)
    return S3Snapshot.under_prefix(location.uri, location.prefix, store.list_objects(location))


@pytest.fixture
def store(s3_client: Any) -> S3Store:
    return S3Store(s3_client)


def test_a_snapshot_is_downloaded_once_and_reused(
    store: S3Store, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="model/config.json", Body=b"{}")
    s3_client.put_object(Bucket=s3_bucket, Key="model/sub/weights.bin", Body=b"\x00" * 1000)
    cache = ArtifactCache(tmp_path / "cache")
    snapshot = _snapshot(store, s3_bucket, "model")
    seen: list[tuple[int, int]] = []

    first = cache.fetch(
        store, snapshot, kind="models", progress=lambda done, total: seen.append((done, total))
    )

    assert (first / "config.json").read_bytes() == b"{}"
    assert (first / "sub" / "weights.bin").stat().st_size == 1000
    assert (first / SNAPSHOT_FILE).is_file()
    assert seen[-1] == (1002, 1002)
    # The file times are the objects' own, so two copies of one object look alike to the trainer.
    listed = {obj.location.key: obj for obj in store.list_objects(S3Location(s3_bucket, "model/"))}
    assert os.stat(first / "config.json").st_mtime == listed["model/config.json"].last_modified.timestamp()

    s3_client.delete_object(Bucket=s3_bucket, Key="model/sub/weights.bin")  # gone from S3 ...
    assert cache.fetch(store, snapshot, kind="models") == first  # ... but cached: no download
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir()] == [first.name]


def test_a_changed_object_gets_a_new_cache_entry(
    store: S3Store, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    cache = ArtifactCache(tmp_path)
    s3_client.put_object(Bucket=s3_bucket, Key="data/a.jsonl", Body=b"one\n")
    before = cache.fetch(store, _snapshot(store, s3_bucket, "data"), kind="data")
    s3_client.put_object(Bucket=s3_bucket, Key="data/a.jsonl", Body=b"two\n")
    after = cache.fetch(store, _snapshot(store, s3_bucket, "data"), kind="data")
    assert before != after
    assert (before / "a.jsonl").read_text() == "one\n"
    assert (after / "a.jsonl").read_text() == "two\n"


def test_concurrent_fetches_of_one_snapshot_end_with_one_complete_copy(
    store: S3Store, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    for index in range(6):
        s3_client.put_object(Bucket=s3_bucket, Key=f"shared/part-{index}.bin", Body=os.urandom(50_000))
    snapshot = _snapshot(store, s3_bucket, "shared")
    cache = ArtifactCache(tmp_path)
    results: list[Path] = []
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            results.append(cache.fetch(S3Store(s3_client), snapshot, kind="models"))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    assert len(set(results)) == 1
    assert sorted(p.name for p in results[0].iterdir()) == [SNAPSHOT_FILE] + [
        f"part-{i}.bin" for i in range(6)
    ]
    assert [p.name for p in (tmp_path / "models").iterdir()] == [results[0].name]  # no partial leftovers


@pytest.mark.parametrize("key", ["../escape.bin", "/abs.bin", "a/./b", ""])
def test_keys_that_would_escape_the_cache_directory_are_refused(key: str) -> None:
    with pytest.raises(JobFailedError, match="cannot be stored as a file"):
        safe_relative_path(key, uri=f"s3://b/{key}")
