"""`eaglenest base-heads build|list|delete` against a real SeaweedFS and a tiny target."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from core.s3 import S3Location
from core.s3_store import S3Store
from db.settings import get_settings
from stack.seaweedfs import S3Endpoint
from tests.worker.tiny_inputs import sharegpt_jsonl, upload_directory
from worker.base_heads import BaseHeadStore, base_head_key
from worker.builtin_catalog import add_dataset
from worker.s3_snapshot import S3Snapshot

# One step on the catalog's data: a tiny random target writes no usable self-instruct prompts.
QUICK_BASE = {"self_instruct_conversations": 0, "regenerate": False, "max_steps": 1, "num_threads": 1}


@pytest.fixture
def heads_uri(
    seaweedfs: S3Endpoint, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    uri = f"s3://{s3_bucket}/base-heads/"
    for name, value in {
        "S3_ENDPOINT_URL": seaweedfs.endpoint_url,
        "S3_ACCESS_KEY_ID": seaweedfs.access_key_id,
        "S3_SECRET_ACCESS_KEY": seaweedfs.secret_access_key,
        "BASE_HEADS_URI": uri,
        "BASE_HEAD_TRAIN_OVERRIDES": json.dumps(QUICK_BASE),
        "BUILTIN_DATASETS_URI": f"s3://{s3_bucket}/builtin/",
        "CACHE_DIR": str(tmp_path / "cache"),
    }.items():
        monkeypatch.setenv(f"EAGLENEST_{name}", value)
    get_settings.cache_clear()
    yield uri
    get_settings.cache_clear()


def test_build_list_and_delete(
    *,
    heads_uri: str,
    s3_client: Any,
    s3_bucket: str,
    tiny_smollm2_target_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = S3Store(s3_client)
    (tmp_path / "tiny_chat.jsonl").write_text(sharegpt_jsonl(8))
    add_dataset(store, get_settings(), str(tmp_path / "tiny_chat.jsonl"), name=None, description="tiny")
    model_uri = upload_directory(s3_client, tiny_smollm2_target_dir, s3_bucket, "models/tiny")
    heads = BaseHeadStore(store, S3Location.parse(heads_uri, field="test"))
    assert main(["base-heads", "list"]) == 0
    assert capsys.readouterr().out.strip() == f"{heads_uri}: no base heads"

    assert main(["base-heads", "build", "--model", model_uri, "--minutes", "0.5"]) == 0
    location = S3Location.parse(model_uri, field="test")
    key = base_head_key(S3Snapshot.under_prefix(model_uri, location.prefix, store.list_objects(location)))
    head = heads.find(key)
    assert head is not None
    assert head.manifest["built_by"] == "eaglenest base-heads build"
    assert head.manifest["builtin_datasets"] == ["tiny_chat"]
    assert head.manifest["hyperparameters"]["max_steps"] == 1  # EAGLENEST_BASE_HEAD_TRAIN_OVERRIDES
    assert head.manifest["training"]["steps"] == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{key}  {head.location.uri}")

    # Built already: nothing is trained again.
    assert main(["base-heads", "build", "--model", model_uri]) == 0
    assert "exists already" in capsys.readouterr().out
    assert heads.find(key) == head

    assert main(["base-heads", "list"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith(f"{key}  model {model_uri}  LlamaForCausalLM  build {head.location.uri}")
    assert main(["base-heads", "delete", key]) == 0
    assert "deleted (3 objects)" in capsys.readouterr().out
    assert heads.find(key) is None
    assert main(["base-heads", "delete", key]) == 1
    assert "no such base head" in capsys.readouterr().out


def test_without_a_configured_prefix_the_command_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("EAGLENEST_BASE_HEADS_URI", raising=False)
    get_settings.cache_clear()
    try:
        assert main(["base-heads", "list"]) == 1
    finally:
        get_settings.cache_clear()
    assert "EAGLENEST_BASE_HEADS_URI is not set" in capsys.readouterr().out
