"""The base-head store: its key, commits, sha256 checks, racing builds (real SeaweedFS)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.s3_store import S3Object, S3Store
from db.settings import Settings
from trainer.file_digest import sha256_of
from worker.base_head_recipe import BASE_RECIPE, base_head_budget_seconds, base_head_config
from worker.base_heads import BaseHeadStore, base_head_key
from worker.s3_snapshot import S3Snapshot, SnapshotEntry

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MODEL = {"config.json": "c1", "model.safetensors": "w1", "tokenizer.json": "t1"}


def _snapshot(files: dict[str, str], *, bucket: str = "models", prefix: str = "dir/") -> S3Snapshot:
    entries = tuple(
        SnapshotEntry(path, S3Object(S3Location(bucket, prefix + path), etag, 10, NOW))
        for path, etag in files.items()
    )
    return S3Snapshot(source=f"s3://{bucket}/{prefix}", entries=entries)


def _head(directory: Path, tag: str) -> Path:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(f'{{"tag": "{tag}"}}')
    (directory / "model.safetensors").write_bytes(tag.encode() * 100)
    return directory


@pytest.fixture
def store(s3_client: Any, s3_bucket: str) -> BaseHeadStore:
    return BaseHeadStore(S3Store(s3_client), S3Location(s3_bucket, "base-heads"))


def test_the_key_is_the_models_content() -> None:
    key = base_head_key(_snapshot(MODEL))
    assert base_head_key(_snapshot(MODEL, bucket="another", prefix="copy/")) == key
    assert base_head_key(_snapshot(dict(reversed(MODEL.items())))) == key
    assert base_head_key(_snapshot(MODEL | {"model.safetensors": "w2"})) != key
    assert base_head_key(_snapshot(MODEL | {"tokenizer.json": "t2"})) != key  # the chat template
    assert base_head_key(_snapshot({**MODEL, "extra.bin": "e"})) != key


def test_a_published_head_is_found_and_checked(store: BaseHeadStore, tmp_path: Path) -> None:
    key = base_head_key(_snapshot(MODEL))
    assert store.find(key) is None
    head_dir = _head(tmp_path / "head", "a")
    published = store.publish(key, head_dir, build="job-a", manifest={"built_by": "arn:job-a"})
    found = store.find(key)
    assert found == published
    assert found.location.uri == f"{store.location(key).uri}builds/job-a/"
    assert found.sha256 == {name: sha256_of(head_dir / name) for name in ("config.json", "model.safetensors")}
    assert found.manifest["built_by"] == "arn:job-a"
    assert store.snapshot(found).paths() == {"config.json", "model.safetensors"}
    store.verify(found, head_dir)
    (head_dir / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(JobFailedError, match="does not match the sha256"):
        store.verify(found, head_dir)
    assert [entry if isinstance(entry, str) else entry.key for entry in store.entries()] == [key]
    assert store.delete(key) == 3
    assert store.find(key) is None


def test_two_jobs_building_one_head_at_once_leave_one_complete_build(
    store: BaseHeadStore, tmp_path: Path
) -> None:
    key = base_head_key(_snapshot(MODEL))
    heads = {tag: _head(tmp_path / tag, tag) for tag in ("a", "b")}
    start = threading.Barrier(2)

    def build(tag: str) -> None:
        start.wait()
        store.publish(key, heads[tag], build=f"job-{tag}", manifest={})

    threads = [threading.Thread(target=build, args=(tag,)) for tag in heads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = store.find(key)
    assert found is not None
    winner = found.location.name.removeprefix("job-")
    # The committed build is whole: its files are the ones its manifest's sha256 names.
    downloaded = tmp_path / "downloaded"
    for name in found.sha256:
        store.store.download(found.location.child(name), downloaded / name)
    store.verify(found, downloaded)
    assert (downloaded / "config.json").read_text() == f'{{"tag": "{winner}"}}'


def test_a_manifest_naming_a_build_elsewhere_is_refused(store: BaseHeadStore, tmp_path: Path) -> None:
    key = base_head_key(_snapshot(MODEL))
    published = store.publish(key, _head(tmp_path / "head", "a"), build="job-a", manifest={})
    forged = {**published.manifest, "build": "s3://elsewhere/heads/"}
    store.store.put_json(forged, store.location(key).child("manifest.json"))
    with pytest.raises(JobFailedError, match="names a build outside its key"):
        store.find(key)


def test_the_recipe_is_layered_under_the_operators_base_overrides(tmp_path: Path) -> None:
    settings = Settings(
        train_overrides={"batch_tokens": 1024, "regenerate": False},
        base_head_train_overrides={"self_instruct_conversations": 5},
        train_nproc=2,
        device="auto",
    )
    config = base_head_config(
        settings, model_dir=tmp_path, data_files=[], run_dir=tmp_path / "run", budget_minutes=3.0
    )
    assert config.batch_tokens == 1024  # the operator's defaults for every run
    assert config.regenerate is BASE_RECIPE["regenerate"]  # the recipe wins over them
    assert config.self_instruct_conversations == 5  # the base head's own overrides win over both
    assert config.time_budget_minutes == 3.0
    assert config.init_head_dir is None
    assert config.nproc == 2  # the worker's processes per training run
    assert config.device == "auto"
    bad = Settings(base_head_train_overrides={"regenerate": False})  # self-instruct needs regenerate
    with pytest.raises(JobFailedError, match="EAGLENEST_BASE_HEAD_TRAIN_OVERRIDES"):
        base_head_config(bad, model_dir=tmp_path, data_files=[], run_dir=tmp_path, budget_minutes=None)


def test_the_budget_is_the_setting_capped_by_half_the_jobs_training_time() -> None:
    settings = Settings(base_head_train_minutes=30)
    assert base_head_budget_seconds(settings, seconds_left=None, trained_seconds=0) == 1800
    assert base_head_budget_seconds(settings, seconds_left=None, trained_seconds=600) == 1200
    # 1000 s left: 200 s are kept for benchmark and publish, half of the other 800 s may build.
    assert base_head_budget_seconds(settings, seconds_left=1000, trained_seconds=0) == 400
    assert base_head_budget_seconds(settings, seconds_left=60, trained_seconds=0) == 0  # too little
