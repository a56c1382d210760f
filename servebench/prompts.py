"""Benchmark prompts: conversations rendered in the target's chat template, as guidellm data.

A conversation's prompt is everything before its last assistant turn, with the generation
prompt (``speculative.evaluation.chat_prompts`` builds the same prompts as token ids
for the in-process benchmark). The text goes to ``/v1/completions`` unchanged, so every
engine decodes exactly these tokens and none applies a chat template of its own.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from speculative.evaluation import rendered_prompt
from trainer.data.schema import Conversation

logger = logging.getLogger(__name__)


def chat_prompt_texts(
    tokenizer: PreTrainedTokenizerBase, conversations: Sequence[Conversation], *, max_prompt_tokens: int
) -> list[str]:
    """Rendered prompts of the conversations that have a user turn and fit ``max_prompt_tokens``."""
    texts: list[str] = []
    too_long = 0
    for conversation in conversations:
        text = rendered_prompt(tokenizer, conversation)
        if text is None:
            continue
        # The template writes its own special tokens; count them the way a server will. Too-long
        # prompts are skipped here, so the tokenizer's own warning about them is noise.
        if len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]) > max_prompt_tokens:
            too_long += 1
            continue
        texts.append(text)
    if too_long:
        logger.info("skipped %d prompts longer than %d tokens", too_long, max_prompt_tokens)
    return texts


def write_guidellm_data(texts: Sequence[str], path: Path, *, requests: int, output_tokens: int) -> int:
    """Write ``requests`` rows for guidellm (``prompt``, ``output_tokens_count``).

    guidellm restarts the data for every concurrency level and stops a level when the data
    runs out, so the file holds exactly one level's requests; with fewer prompts than
    requests the prompts repeat in order. Returns how many distinct prompts were used.
    """
    if not texts:
        raise ValueError("no prompts to write")
    rows = list(itertools.islice(itertools.cycle(texts), requests))
    if len(texts) < requests:
        logger.warning("%d prompts for %d requests per level: prompts repeat", len(texts), requests)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for text in rows:
            handle.write(json.dumps({"prompt": text, "output_tokens_count": output_tokens}) + "\n")
    return min(len(texts), requests)
