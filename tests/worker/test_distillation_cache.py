"""The distillation cache: its key, and two jobs writing one key at once (real SeaweedFS)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.s3 import S3Location
from core.s3_store import S3Object, S3Store
from trainer.config import TrainConfig
from trainer.data.schema import Conversation, Message
from trainer.data.split import content_key
from trainer.eagle.distilled import DistilledRecord, read_distilled, write_distilled
from worker.distillation_cache import DistillationCache, JobCacheUse, cache_key
from worker.s3_snapshot import S3Snapshot, SnapshotEntry

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _snapshot(bucket: str, files: dict[str, str]) -> S3Snapshot:
    """Objects named by their path under s3://bucket/dir/, with the given ETags."""
    entries = tuple(
        SnapshotEntry(path, S3Object(S3Location(bucket, f"dir/{path}"), etag, 10, NOW))
        for path, etag in files.items()
    )
    return S3Snapshot(source=f"s3://{bucket}/dir/", entries=entries)


MODEL = {"config.json": "c1", "model.safetensors": "w1", "tokenizer.json": "t1"}
DATA = {"chat.jsonl": "d1"}


def _config(**overrides: Any) -> TrainConfig:
    return TrainConfig(
        model_dir=Path("m"), data_paths=[Path("d")], out_dir=Path("o"), regenerate=True, **overrides
    )


def _key(
    model: dict[str, str] = MODEL, data: dict[str, str] = DATA, bucket: str = "b", **overrides: Any
) -> str:
    return cache_key(_snapshot(bucket, model), _snapshot(bucket, data), _config(**overrides))[0]


def test_the_key_follows_weights_data_and_generation_settings() -> None:
    base = _key()
    assert _key(model=MODEL | {"model.safetensors": "w2"}) != base
    assert _key(model=MODEL | {"tokenizer.json": "t2"}) != base  # the chat template renders the prompts
    assert _key(data=DATA | {"chat.jsonl": "d2"}) != base
    assert _key(data=DATA | {"more.jsonl": "d3"}) != base
    for changed in (
        {"regenerate_temperature": 0.7},
        {"regenerate_max_new_tokens": 64},
        {"regenerate_turns": "all"},
        {"regenerate_max_prompt_tokens": 128},
        {"self_instruct_conversations": 10},
    ):
        assert _key(**changed) != base, changed
    with_prompts = _key(self_instruct_conversations=10)
    assert _key(self_instruct_conversations=10, self_instruct_temperature=0.8) != with_prompts


def test_the_key_ignores_what_chooses_conversations_but_not_replies() -> None:
    base = _key()
    for unchanged in (
        {"seed": 7},
        {"max_conversations": 100},
        {"holdout_fraction": 0.2},
        {"eval_fraction": 0.1},
        {"time_budget_minutes": 30.0},
        {"regenerate_batch_size": 8},
        {"context_loss": True},
        {"regenerate_top_p": 0.9},  # greedy: top-p changes nothing
        {"regenerate_max_turns": 4},  # only with regenerate_turns=all
        {"lr": 1e-4},
    ):
        assert _key(**unchanged) == base, unchanged
    assert _key(self_instruct_conversations=10) == _key(self_instruct_conversations=500)
    # The same contents copied to another bucket or renamed are the same data.
    assert _key(bucket="elsewhere") == base
    assert _key(data={"renamed.jsonl": "d1"}) == base


@dataclass(frozen=True)
class _Job:
    name: str
    arn: str
    created_at: datetime


def _records(tag: str, count: int) -> list[DistilledRecord]:
    records = []
    for index in range(count):
        prompt = [Message("user", f"{tag} question {index}")]
        records.append(
            DistilledRecord(
                origin=content_key(Conversation(messages=prompt)),
                conversation=Conversation(messages=[*prompt, Message("assistant", f"{tag} answer {index}")]),
            )
        )
    return records


def _open(store: S3Store, root: S3Location, name: str) -> JobCacheUse:
    model, data = _snapshot("models", MODEL), _snapshot("data", DATA)
    job = _Job(name, f"arn:aws:sagemaker:us-east-1:000000000000:optimization-job/{name}", NOW)
    return JobCacheUse.open(
        store, root, job=job, model=model, model_uri="s3://models/dir/", data=data, config=_config()
    )


def test_two_jobs_writing_one_key_at_once_both_keep_their_parts(
    s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    store, root = S3Store(s3_client), S3Location(s3_bucket, "distillation/")
    writers = [_open(store, root, name) for name in ("first", "second")]
    assert writers[0].key == writers[1].key
    assert all(not writer.reused_parts for writer in writers)
    shared = _records("shared", 2)  # both distilled these: the reader keeps them once
    for tag in ("a", "b"):
        write_distilled(tmp_path / f"{tag}.jsonl", [*shared, *_records(tag, 3)])

    start = threading.Barrier(2)
    lineage: dict[str, dict[str, Any]] = {}

    def publish(writer: JobCacheUse, tag: str) -> None:
        start.wait()
        lineage[tag] = writer.publish(tmp_path / f"{tag}.jsonl", {"distilled_reused": 0})

    threads = [
        threading.Thread(target=publish, args=(writer, tag))
        for writer, tag in zip(writers, ("a", "b"), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert {lineage[tag]["new"] for tag in ("a", "b")} == {5}
    assert lineage["a"]["new_part"] != lineage["b"]["new_part"]
    reader = _open(store, root, "third")
    assert sorted(part.records or 0 for part in reader.reused_parts) == [5, 5]
    distilled = read_distilled(reader.download(tmp_path / "reader"))
    texts = {r.conversation.messages[-1].content for r in distilled.records}
    assert texts == {f"{tag} answer {i}" for tag in ("a", "b") for i in range(3)} | {
        f"shared answer {i}" for i in range(2)
    }
    entry = DistillationCache(store, root).entry(reader.key)
    assert entry.manifest is not None
    assert entry.manifest["model_uri"] == "s3://models/dir/"
    assert entry.manifest["generation"]["max_new_tokens"] == 128
    assert entry.records == 10


def test_a_redelivered_job_does_not_reuse_its_own_part(
    s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    store, root = S3Store(s3_client), S3Location(s3_bucket, "distillation/")
    write_distilled(tmp_path / "mine.jsonl", _records("mine", 2))
    _open(store, root, "job").publish(tmp_path / "mine.jsonl", {})
    assert _open(store, root, "job").reused_parts == []
    assert len(_open(store, root, "other").reused_parts) == 1


def test_a_job_that_distilled_nothing_adds_no_part(s3_client: Any, s3_bucket: str, tmp_path: Path) -> None:
    store, root = S3Store(s3_client), S3Location(s3_bucket, "distillation/")
    write_distilled(tmp_path / "none.jsonl", [])
    assert _open(store, root, "job").publish(tmp_path / "none.jsonl", {})["new_part"] is None
    assert DistillationCache(store, root).entries() == []
