"""Test doubles and references for the engine tests.

Besides untrained random heads (acceptance near zero), ``oracle_head`` gives a
``ReplayHead``: a real head whose cache and layer run as usual but whose logits point at
the target's own greedy continuation, so long accepted runs, bonus tokens and cache
rollbacks of every size are exercised too. It can be told to be wrong at chosen positions.
"""

from __future__ import annotations

from collections.abc import Collection

import torch
from transformers import PreTrainedModel

from speculative.replay import ReplayHead
from trainer.eagle.config import DraftVariant, Eagle3HeadConfig
from trainer.eagle.eagle2_model import build_draft_model
from trainer.eagle.model import Eagle3DraftModel
from trainer.models.tiny import build_tiny_target

ARCHITECTURES = [
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "GptOssForCausalLM",
]
TINY_VOCAB = 96


def random_head(
    target: PreTrainedModel,
    *,
    seed: int = 0,
    draft_token_ids: list[int] | None = None,
    variant: DraftVariant = "eagle3",
) -> Eagle3DraftModel:
    """An untrained head; ``draft_token_ids`` (sorted target ids) restricts its vocabulary."""
    vocab = int(target.config.vocab_size)
    kept = draft_token_ids if draft_token_ids is not None else list(range(vocab))
    config = Eagle3HeadConfig.from_target(target.config, draft_vocab_size=len(kept), variant=variant)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = build_draft_model(config)
    used = torch.tensor(kept, dtype=torch.long)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[used] = True
    head.set_draft_vocab(used - torch.arange(len(kept)), t2d)
    head.load_target_embeddings(target.get_input_embeddings().weight.detach())
    return head.eval()


def oracle_head(
    target: PreTrainedModel,
    reference: list[int],
    *,
    wrong_at: Collection[int] = (),
    draft_token_ids: list[int] | None = None,
) -> ReplayHead:
    """A head that always agrees with the target (``reference`` = prompt + its greedy
    output), except at the predicted positions in ``wrong_at``."""
    return ReplayHead.from_head(random_head(target, draft_token_ids=draft_token_ids), reference, wrong_at)


def tiny_target(architecture: str, *, vocab_size: int = TINY_VOCAB, seed: int = 1) -> PreTrainedModel:
    """A tiny random target whose greedy output varies.

    Freshly initialised tiny models mostly repeat one token (with tied embeddings the
    current token's own logit dominates), which would make output comparisons weak; a
    random final-norm scale breaks that symmetry.
    """
    target = build_tiny_target(architecture, vocab_size=vocab_size, seed=seed)
    norm = target.model.norm.weight
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        norm.copy_(3.0 * torch.randn(norm.shape, generator=generator))
    return target


def hf_greedy(target: PreTrainedModel, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Hugging Face's own greedy decoding: the reference every engine output must equal."""
    with torch.inference_mode():
        output = target.generate(
            torch.tensor([prompt]),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            pad_token_id=target.config.pad_token_id,
        )
    return [int(token) for token in output[0, len(prompt) :]]
