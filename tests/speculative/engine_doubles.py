"""Test doubles and references for the engine tests.

Besides untrained random heads (acceptance near zero), ``oracle_head`` gives a
``ReplayHead``: a real head whose cache and layer run as usual but whose logits point at
the target's own greedy continuation, so long accepted runs, bonus tokens and cache
rollbacks of every size are exercised too. It can be told to be wrong at chosen positions.
"""

from __future__ import annotations

from collections.abc import Collection

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from engine.drafting.replay import ReplayHead
from engine.heads.config import DraftVariant, Eagle3HeadConfig
from engine.heads.export import new_head
from engine.heads.model import DraftKVCache, Eagle3DraftModel
from engine.heads.peagle import PEagleDraftModel, PEagleHeadConfig
from speculative import SpeculativeDecoder
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
    """An untrained head; ``draft_token_ids`` (sorted target ids) restricts its vocabulary;
    ``variant`` peagle makes it a P-EAGLE head (mask token: the last id of the vocabulary)."""
    vocab = int(target.config.vocab_size)
    kept = draft_token_ids if draft_token_ids is not None else list(range(vocab))
    family = "eagle2" if variant == "eagle2" else "eagle3"
    config = Eagle3HeadConfig.from_target(target.config, draft_vocab_size=len(kept), variant=family)
    if variant == "peagle":
        config = PEagleHeadConfig(**config.model_dump(), mask_token_id=vocab - 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = new_head(config)
        if isinstance(head, PEagleDraftModel):
            head.mask_hidden.data.normal_(0.0, 1.0)
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


class ParallelReplayHead(ReplayHead, PEagleDraftModel):
    """``ReplayHead`` for a P-EAGLE head: every drafted row (the last entry and the mask
    slots after it) replays the token two positions after its own."""

    def forward(
        self,
        input_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        cache: DraftKVCache,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        out = super().forward(input_ids, hidden, position_ids, cache, attention_mask)
        self._rows, self._row_positions = out[0], position_ids[0].tolist()
        return out


def parallel_oracle_head(
    target: PreTrainedModel, reference: list[int], *, wrong_at: Collection[int] = ()
) -> ParallelReplayHead:
    """``oracle_head`` for a P-EAGLE head."""
    base = random_head(target, variant="peagle")
    replay = ParallelReplayHead.from_head(base, reference, wrong_at)
    assert isinstance(replay, ParallelReplayHead)
    return replay


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


def one_turn_chats(tokenizer: PreTrainedTokenizerBase, questions: list[str]) -> list[list[int]]:
    """Each question as a one-turn chat with the generation prompt, in token ids."""
    return [
        list(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True
            )["input_ids"]
        )
        for question in questions
    ]


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


def random_head_decoder(target: PreTrainedModel) -> SpeculativeDecoder:
    """K=3 on the slot pool with a random head: nearly every draft is rejected and rolled back."""
    return SpeculativeDecoder(
        target,
        random_head(target),
        num_speculative_tokens=3,
        eos_token_ids=[],
        slot_pool=True,
        pack_weights=False,
    )
