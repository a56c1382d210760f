"""Context loss: the head also learns a distilled conversation's context, past the chat
template's fixed opening, labelled with the target's own greedy token at each position."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from engine.capture import output_head
from engine.replies import SampleFeatures
from trainer.data.tokenize import user_turn_prefix


def fixed_opening(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The tokens every rendered conversation starts with: the template's text up to the first
    user message (a default system prompt included). Learning them teaches the head nothing."""
    return list(tokenizer(user_turn_prefix(tokenizer), add_special_tokens=False, verbose=False)["input_ids"])


def _context_learned_from(prompt: list[int], opening: list[int]) -> int:
    """The first context position whose token the head learns: past the template's opening."""
    shared = next(
        (i for i, (a, b) in enumerate(zip(prompt, opening, strict=False)) if a != b),
        min(len(prompt), len(opening)),
    )
    return max(shared, 1)


def distilled_loss_mask(prompt_ids: list[int], reply_length: int, opening: list[int] | None) -> list[int]:
    """Loss bits of a distilled sample: its reply (stop token included) and, given the
    template's ``opening`` (context_loss), its context past that opening too."""
    if opening is None:
        context = [0] * len(prompt_ids)
    else:
        learned_from = _context_learned_from(prompt_ids, opening)
        context = [0] * learned_from + [1] * (len(prompt_ids) - learned_from)
    return context + [1] * reply_length


# Context positions per lm_head call when labelling: its logits are positions x vocabulary
# (1,024 x 49,152 float32 for SmolLM2 is 200 MB), and a chunk holds 2,048 contexts.
LABEL_POSITIONS_PER_CALL = 1024


@torch.inference_mode()
def label_contexts(model: PreTrainedModel, labelled: Sequence[tuple[int, SampleFeatures]]) -> None:
    """Fill the target's greedy next token at the first ``n`` positions of each recorded
    sample's features, from their final hidden states (the training pass computes it itself for
    unrecorded samples). ``n`` is the context's length less one: positions 0 .. n-1 predict the
    context's own next token, and the last context position already holds the first generation
    step's argmax.

    The contexts of a whole chunk go through the lm_head in slabs of
    ``LABEL_POSITIONS_PER_CALL`` positions, and the labels come back to the host once: on a GPU
    a call and a read-back per reply cost more than the products themselves."""
    head = output_head(model)
    device, dtype = head.weight.device, head.weight.dtype
    labels: list[torch.Tensor] = []
    pending: list[torch.Tensor] = []
    pending_positions = 0

    def flush() -> None:
        nonlocal pending_positions
        if pending:
            # The recorded features are kept in host memory; the head is on the target's device.
            hidden = torch.cat(pending).to(device=device, dtype=dtype)
            labels.append(head(hidden).argmax(-1))
        pending.clear()
        pending_positions = 0

    for positions, features in labelled:
        start = 0
        while start < positions:
            # Slabs run across replies: every call but the last is full.
            take = min(positions - start, LABEL_POSITIONS_PER_CALL - pending_positions)
            pending.append(features.final_hidden[start : start + take])
            pending_positions += take
            start += take
            if pending_positions == LABEL_POSITIONS_PER_CALL:
                flush()
    flush()
    if not labels:
        return
    on_host = torch.cat(labels).cpu()  # the one read-back
    for (positions, features), part in zip(
        labelled, torch.split(on_host, [positions for positions, _ in labelled]), strict=True
    ):
        features.argmax_ids[:positions] = part
