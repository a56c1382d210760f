"""Read back what a finished job published under S3OutputLocation and check it file by file."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoConfig

from engine.heads.serving_settings import recorded_speculative_tokens, served_speculative_tokens
from engine.heads.validate import validate_head
from worker.head_serving import recommended_tokens

EXPECTED_FILES = {
    "eagle_model/config.json",
    "eagle_model/model.safetensors",
    "benchmark/results.json",
    "benchmark/results.csv",
    "training/metrics.jsonl",
}


@dataclass(frozen=True)
class Published:
    lineage: dict[str, Any]
    results: dict[str, Any]
    csv_rows: list[dict[str, str]]
    metrics: list[dict[str, Any]]
    keys: set[str]  # every key under the output location, relative to it


def split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def read_published(
    s3_client: Any,
    output_uri: str,
    *,
    job_arn: str,
    target_dir: Path,
    tmp: Path,
    draft_variant: str = "eagle3",
    draft_vocab: bool | None = None,
) -> Published:
    """Download every published file, check each against lineage.json's sha256 and size,
    and check that the head loads for the target."""
    bucket, prefix = split(output_uri)
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    keys = {item["Key"][len(prefix) :] for item in listed}
    # An EAGLE-2 head's reduced draft vocabulary is published beside its weights; ``draft_vocab``
    # says whether there is one (by default: for EAGLE-2 heads).
    with_vocab = draft_variant == "eagle2" if draft_vocab is None else draft_vocab
    expected = EXPECTED_FILES | ({"eagle_model/draft_vocab.json"} if with_vocab else set())
    assert keys == {*expected, "lineage.json"}, f"unexpected layout (staging left behind?): {sorted(keys)}"

    lineage = json.loads(s3_client.get_object(Bucket=bucket, Key=prefix + "lineage.json")["Body"].read())
    assert lineage["job"]["arn"] == job_arn
    assert lineage["draft_variant"] == draft_variant
    outputs = {item["path"]: item for item in lineage["outputs"]}
    assert set(outputs) == expected
    for relative, item in outputs.items():
        body = s3_client.get_object(Bucket=bucket, Key=prefix + relative)["Body"].read()
        assert item["uri"] == f"s3://{bucket}/{prefix}{relative}"
        assert item["sha256"] == hashlib.sha256(body).hexdigest(), f"{relative}: sha256 differs from lineage"
        assert item["size"] == len(body)
        local = tmp / relative
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(body)

    # The published head is a valid native EAGLE-3 head for this target.
    validate_head(tmp / "eagle_model", AutoConfig.from_pretrained(target_dir))
    results = json.loads((tmp / "benchmark/results.json").read_text())
    _check_serving_settings(
        json.loads((tmp / "eagle_model/config.json").read_text()), results, lineage, output_uri
    )
    csv_rows = list(csv.DictReader(io.StringIO((tmp / "benchmark/results.csv").read_text())))
    metrics = [json.loads(line) for line in (tmp / "training/metrics.jsonl").read_text().splitlines()]
    return Published(lineage=lineage, results=results, csv_rows=csv_rows, metrics=metrics, keys=keys)


def _check_serving_settings(
    config: dict[str, Any], results: dict[str, Any], lineage: dict[str, Any], output_uri: str
) -> None:
    """The head's config serves with the K the benchmark recommends (rewritten at publish) and
    records the K it trained with, for the base model it was trained on."""
    trained = lineage["hyperparameters"]["ttt_steps"]
    expected = recommended_tokens(results, head_uri=output_uri + "eagle_model/", trained=trained)
    head_uri = output_uri + "eagle_model/"
    fixed_k_rows = [
        row
        for row in results.get("rows") or []
        if row.get("head_dir") == head_uri and not row.get("adaptive") and row.get("num_speculative_tokens")
    ]
    # A benchmark without fixed-K rows (adaptive only) recommends no K: the head serves the trained one.
    assert (expected.recommended is not None) == bool(fixed_k_rows)
    assert recorded_speculative_tokens(config) == expected
    assert served_speculative_tokens(config) == (expected.recommended or trained)
    assert config["speculators_config"]["verifier"]["name_or_path"] == lineage["source_model"]["uri"]
