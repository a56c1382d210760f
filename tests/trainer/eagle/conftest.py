"""Fixtures for the EAGLE-3 tests: tiny targets of every architecture and small chat data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.trainer.eagle.tiny_data import write_chat_data
from trainer.eagle.capture import SUPPORTED_ARCHITECTURES
from trainer.models.tiny import write_tiny_target


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # Tiny models gain nothing from a second thread; the other core stays free for others.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session", params=SUPPORTED_ARCHITECTURES)
def tiny_target_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny target (model + byte-level ChatML tokenizer) of each supported architecture."""
    architecture: str = request.param
    return write_tiny_target(architecture, tmp_path_factory.mktemp(architecture))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_target("LlamaForCausalLM", tmp_path_factory.mktemp("llama"))


@pytest.fixture
def chat_data(tmp_path: Path) -> Path:
    return write_chat_data(tmp_path / "chat.jsonl", conversations=40)
