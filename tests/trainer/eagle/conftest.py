"""Fixtures for the EAGLE-3 tests: small chat data (tiny targets: tests/fixtures/models.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer.eagle.tiny_data import write_chat_data


@pytest.fixture
def chat_data(tmp_path: Path) -> Path:
    return write_chat_data(tmp_path / "chat.jsonl", conversations=40)
