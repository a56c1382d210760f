"""Shipped base heads (heads/<model>/): the rebuild command on a tiny budget, the checks that
refuse a tampered or mismatching head, and a job on the model starting from it (or, when the
shipped head is tampered with, building its own)."""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from sqlalchemy.orm import Session, sessionmaker

from cli.main import build_parser, main
from db.queries.optimization_job import list_job_events
from db.session import session_scope
from db.settings import Settings
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.worker.tiny_inputs import upload_directory
from trainer.config import CUDA_GENERATION_ROWS, TrainConfig
from trainer.file_digest import sha256_of
from trainer.train import train
from worker import shipped_head_build, shipped_heads
from worker.artifacts import HeadInput
from worker.code_version import code_version
from worker.context import JobContext
from worker.job_store import JobStore
from worker.lineage import base_head_lineage
from worker.pipeline import Stage
from worker.runner import run_optimization_job
from worker.shipped_head_build import ShipOptions, ship_base_head, ship_config
from worker.shipped_head_chain import DISTILLED_FILE, prepare_continuation, save_distilled
from worker.shipped_head_eval import EvalSettings
from worker.shipped_heads import ShippedHeadRefusedError, shipped_head_for, verify_shipped_head
from worker.stages.base_head import provide_base_head
from worker.stages.data import resolve_training_data
from worker.stages.prepare import prepare_inputs
from worker.stages.validate import validate_artifacts

pytestmark = pytest.mark.slow


# A tiny random target writes no usable prompts or replies: train on the data as it is.
# A base head a job builds itself: one step on the built-in data.
QUICK_BASE = {"self_instruct_conversations": 0, "regenerate": False, "max_steps": 1}
TINY = {"regenerate": False, "self_instruct_conversations": 0, "max_steps": 2, "max_conversations": 8}


@pytest.fixture(scope="module")
def shipped(tiny_smollm2_target_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``eaglenest base-heads ship`` on a tiny budget: heads/<model>/ as the repository holds it."""
    root = tmp_path_factory.mktemp("shipped")
    # When the build reads its code version: before it trains (the manifest names the code
    # that ran, not commits made during an hour-long build).
    order: list[str] = []

    def version() -> dict[str, Any]:
        order.append("code version")
        return code_version()

    def train_after(config: TrainConfig, progress: Any) -> Any:
        order.append("train")
        return train(config, progress)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shipped_head_build, "code_version", version)
        patch.setattr(shipped_head_build, "train", train_after)
        head = _tiny_ship(tiny_smollm2_target_dir, root, continue_build=False)
    assert order == ["code version", "train"]
    return head


def _tiny_ship(model_dir: Path, root: Path, *, continue_build: bool) -> Path:
    """``eaglenest base-heads ship`` into ``root/heads/tiny`` on a tiny budget (``--continue``:
    from the head already there)."""
    options = ShipOptions(
        model_dir=model_dir,
        out_dir=root / "heads" / "tiny",
        work_dir=root / "work",
        minutes=1.0,
        datasets=("humaneval",),
        evaluation=EvalSettings(prompts=2, max_new_tokens=8),
        command="eaglenest base-heads ship ..." + (" --continue" if continue_build else ""),
        overrides=TINY,
        continue_build=continue_build,
    )
    ship_base_head(Settings(), options, say=lambda _: None)
    return options.out_dir


def test_the_rebuild_writes_a_bf16_head_and_a_manifest_that_describes_it(
    shipped: Path, tiny_smollm2_target_dir: Path
) -> None:
    manifest = json.loads((shipped / "manifest.json").read_text())
    assert set(manifest["recipe"]) == set(TrainConfig.model_fields)  # every field of the recipe
    assert manifest["recipe"]["export_dtype"] == "bfloat16"
    [dataset] = manifest["data"]["datasets"]
    assert dataset["name"] == "humaneval"
    assert len(dataset["sha256"]) == 64
    assert manifest["budget"]["minutes"] == 1.0
    assert manifest["budget"]["total_minutes"] == 1.0
    assert manifest["chain"] == []  # built from scratch
    assert manifest["data"]["distilled"] == {
        "file": DISTILLED_FILE,
        "records": 0,  # TINY distils nothing
        "sha256": sha256_of(shipped / DISTILLED_FILE),
    }
    assert manifest["hardware"]["cpu_count"] >= 1
    assert 0 < manifest["draft_vocab"]["coverage_of_training_tokens"] <= 1
    evaluation = manifest["evaluation"]
    assert evaluation["prompt_count"] == 2
    assert evaluation["device"] == "cpu"  # measured where it trained
    assert evaluation["measured_on"]["cpu_count"] >= 1
    assert evaluation["tau"] >= 1.0
    assert evaluation["speedup"] > 0
    assert manifest["files"] == {
        name: sha256_of(shipped / name) for name in ("config.json", "model.safetensors")
    }
    assert manifest["target"]["files"]["model.safetensors"] == sha256_of(
        tiny_smollm2_target_dir / "model.safetensors"
    )
    assert verify_shipped_head(shipped).sha256 == manifest["files"]
    found = shipped_head_for(tiny_smollm2_target_dir, shipped.parent)
    assert found is not None
    assert found.directory == shipped


def test_evaluate_write_records_this_machines_measurement_and_keeps_the_earlier_one(
    shipped: Path, tmp_path: Path, tiny_smollm2_target_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``base-heads evaluate --write``: how a head built on a GPU gets its CPU figures."""
    head = shutil.copytree(shipped, tmp_path / "tiny")
    first = json.loads((head / "manifest.json").read_text())
    argv = ["base-heads", "evaluate", "--model-dir", str(tiny_smollm2_target_dir), "--head", str(head)]
    assert main([*argv, "--eval-prompts", "3", "--eval-max-new-tokens", "4", "--write"]) == 0
    assert "tau " in capsys.readouterr().out
    manifest = json.loads((head / "manifest.json").read_text())
    evaluation = manifest["evaluation"]
    assert (evaluation["prompt_count"], evaluation["max_new_tokens"], evaluation["k"]) == (3, 4, 3)
    assert evaluation["tau"] >= 1.0
    assert manifest["earlier_evaluations"] == [first["evaluation"]]
    assert {key: manifest[key] for key in first if key != "evaluation"} == {
        key: value for key, value in first.items() if key != "evaluation"
    }
    assert verify_shipped_head(head).sha256 == first["files"]  # the head itself is untouched


def test_a_head_built_against_another_conversion_of_the_model_is_bound_to_this_one(
    shipped: Path, tmp_path: Path, tiny_smollm2_target_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU image's transformers writes another config.json: jobs here would not find the head
    until ``evaluate --write --bind`` names this machine's build, the same weights."""
    heads = tmp_path / "heads"
    head = shutil.copytree(shipped, heads / "tiny")
    manifest = json.loads((head / "manifest.json").read_text())
    elsewhere = {**manifest["target"]["files"], "config.json": "0" * 64}
    manifest["target"]["files"] = elsewhere
    (head / "manifest.json").write_text(json.dumps(manifest))
    assert shipped_head_for(tiny_smollm2_target_dir, heads) is None  # not this build's config
    argv = ["base-heads", "evaluate", "--model-dir", str(tiny_smollm2_target_dir), "--head", str(head)]
    assert main([*argv, "--bind"]) == 1
    assert "give --write too" in capsys.readouterr().out
    assert main([*argv, "--eval-prompts", "1", "--eval-max-new-tokens", "4", "--write", "--bind"]) == 0
    assert "(config.json differed)" in capsys.readouterr().out
    bound = json.loads((head / "manifest.json").read_text())["target"]
    assert bound["built_against"] == elsewhere
    found = shipped_head_for(tiny_smollm2_target_dir, heads)
    assert found is not None
    assert found.directory == head


def test_a_head_for_other_weights_is_not_bound(
    shipped: Path, tmp_path: Path, tiny_smollm2_target_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = shutil.copytree(shipped, tmp_path / "heads" / "tiny")
    manifest = json.loads((head / "manifest.json").read_text())
    manifest["target"]["files"] = {**manifest["target"]["files"], "model.safetensors": "0" * 64}
    (head / "manifest.json").write_text(json.dumps(manifest))
    before = (head / "manifest.json").read_bytes()
    argv = ["base-heads", "evaluate", "--model-dir", str(tiny_smollm2_target_dir), "--head", str(head)]
    assert main([*argv, "--write", "--bind"]) == 1
    assert "are not the ones the head was trained for" in capsys.readouterr().out
    assert (head / "manifest.json").read_bytes() == before


def test_evaluate_refuses_a_tampered_head_and_bad_arguments_before_measuring(
    shipped: Path, tmp_path: Path, tiny_smollm2_target_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = shutil.copytree(shipped, tmp_path / "tiny")
    before = (head / "manifest.json").read_bytes()
    argv = ["base-heads", "evaluate", "--model-dir", str(tiny_smollm2_target_dir), "--head", str(head)]
    assert main([*argv, "--eval-prompts", "0"]) == 1
    assert "--eval-prompts must be at least 1, got 0" in capsys.readouterr().out
    with (head / "model.safetensors").open("ab") as weights:
        weights.write(b"\0")
    assert main([*argv, "--write"]) == 1
    assert "model.safetensors has sha256" in capsys.readouterr().out
    assert (head / "manifest.json").read_bytes() == before  # nothing recorded over it


def test_ship_takes_no_datasets_after_the_flag_and_humaneval_and_champ_by_default() -> None:
    args = build_parser().parse_args(
        ["base-heads", "ship", "--model-dir", "m", "--out", "o", "--minutes", "1", "--datasets"]
    )
    assert args.datasets == []
    defaults = build_parser().parse_args(
        ["base-heads", "ship", "--model-dir", "m", "--out", "o", "--minutes", "1"]
    )
    assert defaults.datasets == ["humaneval", "champ"]


def test_a_continued_build_starts_from_the_head_and_records_the_chain(
    shipped: Path, tmp_path: Path, tiny_smollm2_target_dir: Path
) -> None:
    """``ship --continue``: the head in --out is the starting point, a new seed writes new prompts,
    the manifest lists the earlier build and adds up the budget."""
    first = json.loads((shipped / "manifest.json").read_text())
    shutil.copytree(shipped, tmp_path / "heads" / "tiny")
    out = _tiny_ship(tiny_smollm2_target_dir, tmp_path, continue_build=True)
    manifest = json.loads((out / "manifest.json").read_text())
    [earlier] = manifest["chain"]
    assert earlier["files"] == first["files"]
    assert earlier["rebuild"] == first["rebuild"]
    assert earlier["minutes"] == 1.0
    assert manifest["budget"]["total_minutes"] == 2.0
    assert manifest["recipe"]["seed"] == first["recipe"]["seed"] + 1
    assert manifest["recipe"]["init_head_dir"] == "previous-head"
    assert manifest["files"] != first["files"]  # trained further
    assert verify_shipped_head(out).sha256 == manifest["files"]


def test_a_continued_build_keeps_every_earlier_reply(tmp_path: Path) -> None:
    """The replies file grows build by build: earlier replies first, byte for byte, gzip
    without a timestamp (the same replies give the same sha256)."""
    earlier, new = tmp_path / "earlier.jsonl", tmp_path / "new.jsonl"
    earlier.write_text('{"reply": 1}\n{"reply": 2}\n')
    new.write_text('{"reply": 3}\n\n')
    out = tmp_path / "out"
    out.mkdir()
    entry = save_distilled(out, [earlier, new])
    assert entry["records"] == 3
    assert entry["sha256"] == sha256_of(out / DISTILLED_FILE)
    with gzip.open(out / DISTILLED_FILE, "rt") as packed:
        assert packed.read() == '{"reply": 1}\n{"reply": 2}\n{"reply": 3}\n'
    again = tmp_path / "again"
    again.mkdir()
    assert save_distilled(again, [earlier, new])["sha256"] == entry["sha256"]


def test_continuing_without_a_built_head_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ShippedHeadRefusedError, match=r"--continue needs a built head in .*manifest.json"):
        prepare_continuation(tmp_path / "heads" / "none", tmp_path / "work")


def test_a_tampered_or_mismatching_head_is_refused(
    shipped: Path, tmp_path: Path, tiny_llama_dir: Path
) -> None:
    heads = tmp_path / "heads"
    shutil.copytree(shipped, heads / "tiny")
    assert shipped_head_for(tiny_llama_dir, heads) is None  # another model: not its head
    weights = heads / "tiny" / "model.safetensors"
    corrupted = bytearray(weights.read_bytes())
    corrupted[-1] ^= 0xFF  # one bit flipped on disk
    weights.write_bytes(bytes(corrupted))
    with pytest.raises(ShippedHeadRefusedError, match=r"model.safetensors has sha256 .* refused"):
        verify_shipped_head(heads / "tiny")


def test_another_build_of_the_model_is_refused(
    shipped: Path, tmp_path: Path, tiny_smollm2_target_dir: Path
) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_smollm2_target_dir, model)
    (model / "tokenizer_config.json").write_text("{}")  # another chat template, say
    with pytest.raises(ShippedHeadRefusedError, match=r"another build of this model: tokenizer_config.json"):
        shipped_head_for(model, shipped.parent)


def _run_base_stage(
    factory: sessionmaker[Session], settings: Settings, model_uri: str
) -> tuple[HeadInput | None, list[str]]:
    """validate, data (the built-in catalog), prepare and base on a job reading ``model_uri``."""
    with session_scope(factory) as session:
        owner = create_account(session)
        job_id = create_optimization_job(
            session,
            account_id=owner.account_id,
            aws_account_id=owner.aws_account_id,
            model_source={"S3": {"S3Uri": model_uri}},
            output_config={"S3OutputLocation": model_uri.replace("/models/tiny/", "/out/")},
        ).id
    seen: list[HeadInput | None] = [None]

    def keep(ctx: JobContext) -> None:
        seen[0] = ctx.artifacts.base_head

    stages = [
        Stage("validate", validate_artifacts),
        Stage("data", resolve_training_data),
        Stage("prepare", prepare_inputs),
        Stage("base", provide_base_head),
        Stage("keep", keep),
    ]
    run_optimization_job(job_id, stages=stages, store=JobStore(factory), settings=settings)
    with session_scope(factory) as session:
        events = [event.message for event in list_job_events(session, job_id=job_id)]
    return seen[0], events


@pytest.mark.parametrize("tampered", [False, True], ids=["shipped", "tampered"])
def test_a_job_on_the_model_starts_from_its_shipped_head_unless_it_is_tampered(  # noqa: PLR0917 - fixtures
    tampered: bool,
    shipped: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    worker_session_factory: sessionmaker[Session],
    worker_settings: Settings,
    builtin_catalog: str,
    s3_client: Any,
    s3_bucket: str,
    tiny_smollm2_target_dir: Path,
) -> None:
    heads = tmp_path / "heads"
    shutil.copytree(shipped, heads / "tiny")
    if tampered:
        (heads / "tiny" / "config.json").write_text((shipped / "config.json").read_text() + " ")
    monkeypatch.setattr(shipped_heads, "SHIPPED_HEADS_DIR", heads)
    settings = worker_settings.model_copy(
        update={
            "base_heads_uri": f"s3://{s3_bucket}/base-heads/",
            "base_head_train_minutes": 0.25,
            "base_head_train_overrides": {
                "self_instruct_conversations": 0,
                "regenerate": False,
                "max_steps": 1,
            },
        }
    )
    model_uri = upload_directory(s3_client, tiny_smollm2_target_dir, s3_bucket, "models/tiny")
    head, events = _run_base_stage(worker_session_factory, settings, model_uri)
    assert head is not None, "\n".join(events)
    lineage = base_head_lineage(head, {})
    manifest = json.loads((shipped / "manifest.json").read_text())
    if not tampered:
        assert head.shipped is not None
        assert lineage["shipped_head"] == head.shipped
        assert lineage["sha256"] == manifest["files"]  # the very files the manifest commits
        assert lineage["shipped_head"]["manifest_sha256"] == sha256_of(shipped / "manifest.json")
        assert not head.built_by_this_job
        assert any("the head shipped for this model (tiny" in event for event in events), events
    else:
        refusals = [event for event in events if "config.json has sha256" in event]
        assert refusals, events
        assert "refused" in refusals[0]
        assert "this job builds the model's base head itself" in refusals[0]
        assert head.built_by_this_job
        assert lineage["shipped_head"] is None
        assert lineage["sha256"]["model.safetensors"] != manifest["files"]["model.safetensors"]


def test_a_ship_build_on_a_gpu_distils_with_the_gpus_rows_unless_told_otherwise(tmp_path: Path) -> None:
    """The recipe's defaults stay defaults: on CUDA distillation runs 256 rows, not the CPU's 48."""
    options = ShipOptions(
        model_dir=tmp_path / "model", out_dir=tmp_path / "out", work_dir=tmp_path, minutes=3.0
    )
    on_gpu = ship_config(Settings(), replace(options, overrides={"device": "cuda"}), [], {})
    assert on_gpu.generation_rows(torch.device("cuda")) == CUDA_GENERATION_ROWS
    assert on_gpu.generation_rows(torch.device("cpu")) == on_gpu.regenerate_batch_size
    named = ship_config(
        Settings(), replace(options, overrides={"device": "cuda", "regenerate_batch_size": 64}), [], {}
    )
    assert named.generation_rows(torch.device("cuda")) == 64
