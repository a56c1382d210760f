"""Fixtures shared by the trainer tests."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from trainer.models.fetch import fetch_model, is_complete

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
SMOLLM2_DIR = REPO_ROOT / ".cache" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face directory (float32 safetensors + tokenizer).

    Converted once into the repo's git-ignored cache (about 25 s on 2 CPU cores, a
    540 MB file) and reused by every later session; ``make model`` fills the same place.
    """
    already = is_complete(SMOLLM2_DIR)
    started = time.monotonic()
    path = fetch_model("smollm2-135m-instruct", SMOLLM2_DIR)
    if not already:
        logger.warning("converted SmolLM2-135M-Instruct into %s in %.1fs", path, time.monotonic() - started)
    return path
