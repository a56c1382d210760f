"""`eaglenest distillation-cache list|delete` against a real SeaweedFS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from core.s3 import S3Location
from core.s3_store import S3Store
from db.settings import get_settings
from stack.seaweedfs import S3Endpoint
from trainer.data.schema import Conversation, Message
from trainer.eagle.distilled import DistilledRecord, write_distilled
from worker.distillation_cache import DistillationCache


@pytest.fixture
def cache_uri(seaweedfs: S3Endpoint, s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    uri = f"s3://{s3_bucket}/distillation/"
    monkeypatch.setenv("EAGLENEST_S3_ENDPOINT_URL", seaweedfs.endpoint_url)
    monkeypatch.setenv("EAGLENEST_S3_ACCESS_KEY_ID", seaweedfs.access_key_id)
    monkeypatch.setenv("EAGLENEST_S3_SECRET_ACCESS_KEY", seaweedfs.secret_access_key)
    monkeypatch.setenv("EAGLENEST_DISTILLATION_CACHE_URI", uri)
    get_settings.cache_clear()
    yield uri
    get_settings.cache_clear()


def _add_entry(store: S3Store, root: S3Location, key: str, records: int, tmp_path: Path) -> None:
    path = tmp_path / f"{key}.jsonl"
    write_distilled(
        path,
        [
            DistilledRecord(
                origin=f"{key}-{index}",
                conversation=Conversation(
                    messages=[Message("user", "hi"), Message("assistant", f"hello {index}")]
                ),
            )
            for index in range(records)
        ],
    )
    manifest = {"key": key, "model_uri": f"s3://models/{key}/", "data_uri": "s3://data/", "generation": {}}
    DistillationCache(store, root).add_part(key, path, name="job-1.jsonl", records=records, manifest=manifest)


def test_list_shows_each_entry_and_delete_removes_one(
    cache_uri: str, s3_client: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, root = S3Store(s3_client), S3Location.parse(cache_uri, field="uri")
    assert main(["distillation-cache", "list"]) == 0
    assert "no entries" in capsys.readouterr().out

    _add_entry(store, root, "a" * 32, 3, tmp_path)
    _add_entry(store, root, "b" * 32, 5, tmp_path)
    assert main(["distillation-cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("a" * 32)
    assert "3 records" in lines[0]
    assert f"s3://models/{'a' * 32}/" in lines[0]
    assert lines[1].startswith("b" * 32)
    assert "5 records" in lines[1]
    assert "1 parts" in lines[1]

    assert main(["distillation-cache", "delete", "a" * 32]) == 0
    assert "deleted (2 objects)" in capsys.readouterr().out  # its manifest and its one part
    assert [entry.key for entry in DistillationCache(store, root).entries()] == ["b" * 32]
    assert main(["distillation-cache", "delete", "a" * 32]) == 1
    assert "no such entry" in capsys.readouterr().out


def test_without_a_configured_cache_the_command_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("EAGLENEST_DISTILLATION_CACHE_URI", raising=False)
    get_settings.cache_clear()
    try:
        assert main(["distillation-cache", "list"]) == 1
    finally:
        get_settings.cache_clear()
    assert "EAGLENEST_DISTILLATION_CACHE_URI is not set" in capsys.readouterr().out


def test_entries_written_now_list_in_key_order(cache_uri: str, s3_client: Any, tmp_path: Path) -> None:
    store, root = S3Store(s3_client), S3Location.parse(cache_uri, field="uri")
    for key in ("c" * 32, "a" * 32):
        _add_entry(store, root, key, 1, tmp_path)
    entries = DistillationCache(store, root).entries()
    assert [entry.key for entry in entries] == ["a" * 32, "c" * 32]
    assert all(entry.size > 0 for entry in entries)
    assert [entry.manifest["model_uri"] for entry in entries if entry.manifest] == [
        f"s3://models/{'a' * 32}/",
        f"s3://models/{'c' * 32}/",
    ]


def test_a_state_dir_without_a_running_stack_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["distillation-cache", "list", "--state-dir", str(tmp_path / "state")]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"error: no embedded stack in {tmp_path / 'state'} (")
    assert "start `eaglenest up`" in out
