"""Fixtures for the data tests: the real SmolLM2 tokenizer and a tiny random Llama that uses it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

WriteFile = Callable[..., Path]


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.fixture(scope="session")
def tiny_llama(smollm2_tokenizer: PreTrainedTokenizerBase) -> LlamaForCausalLM:
    """Two layers, width 32, with SmolLM2's vocabulary so its tokenizer and template apply."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(smollm2_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=smollm2_tokenizer.bos_token_id,
        eos_token_id=smollm2_tokenizer.eos_token_id,
        pad_token_id=smollm2_tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.train(False)
    return model


@pytest.fixture
def write_file(tmp_path: Path) -> WriteFile:
    """write_file(name, records=[...] | text=..., gz=False, as_array=False) -> path."""

    def write(
        name: str,
        records: Iterable[Any] | None = None,
        *,
        text: str | None = None,
        gz: bool = False,
        as_array: bool = False,
    ) -> Path:
        if text is None:
            items = list(records or [])
            text = json.dumps(items, indent=2) if as_array else "".join(json.dumps(r) + "\n" for r in items)
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(gzip.compress(data) if gz else data)
        return path

    return write
