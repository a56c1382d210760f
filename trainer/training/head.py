"""The draft head: a new one (draft vocabulary ranked on the samples, weights from the target)
or the init head to fine-tune, its teacher, and the export of the best checkpoint."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import PreTrainedModel

from engine.capture import check_supported, input_embedding_weight
from engine.heads.config import Eagle3HeadConfig, default_variant
from engine.heads.export import export_head, load_head, new_head
from engine.heads.head_format import draft_variant
from engine.heads.model import Eagle3DraftModel
from engine.heads.peagle import PEagleHeadConfig, default_mask_token_id
from trainer.config import TrainConfig
from trainer.data.tokenize import TokenizedConversation
from trainer.data.vocab import DraftVocab, build_draft_vocab
from trainer.eagle.checkpoint import (
    load_head_weights,
)
from trainer.eagle.features import TargetTeacher
from trainer.eagle.head_init import init_head_from_target
from trainer.training.data import (
    use_bf16,
)
from trainer.training.run import HEAD_DIRNAME

logger = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def new_teacher(config: TrainConfig, target: PreTrainedModel, head: Eagle3DraftModel) -> TargetTeacher:
    """The target's features and logits for the head; a new head starts from the target's weights."""
    teacher = TargetTeacher(
        target,
        head.config.aux_layer_ids,
        draft_target_ids=torch.nonzero(head.t2d).flatten(),
        feature_dtype=DTYPES[config.feature_dtype],
        autocast_bf16=use_bf16(config.compute_dtype, target.device),
    )
    if config.init_head_dir is None:
        init_head_from_target(head, target, teacher.draft_lm_head_rows, config.init_from_target)
    return teacher


def build_head(
    config: TrainConfig, target: PreTrainedModel, samples: list[TokenizedConversation]
) -> tuple[Eagle3DraftModel, float | None]:
    """A new head with a draft vocabulary ranked on ``samples``, or the init head with its own."""
    if config.init_head_dir is not None:
        head = load_head(config.init_head_dir, target)
        if config.variant is not None and draft_variant(head.config) != config.variant:
            raise ValueError(
                f"the init head {config.init_head_dir} is a {draft_variant(head.config)} head, this run "
                f"trains {config.variant}: fine-tuning keeps the head's variant"
            )
        if config.aux_layer_ids is not None and list(config.aux_layer_ids) != list(head.config.aux_layer_ids):
            raise ValueError(
                f"aux_layer_ids {config.aux_layer_ids} differ from the init head's "
                f"{head.config.aux_layer_ids}; fine-tuning keeps the head's layers"
            )
        return head.train().to(target.device), _coverage(head.t2d.cpu(), samples)
    vocab_size = int(target.config.get_text_config().vocab_size)
    if config.draft_vocab_size is not None and config.draft_vocab_size > vocab_size:
        raise ValueError(
            f"draft_vocab_size {config.draft_vocab_size} exceeds the target's vocabulary ({vocab_size})"
        )
    vocab = draft_vocab(samples, config.draft_vocab_size, vocab_size)
    resolved_variant = config.variant or default_variant(check_supported(target.config))
    head_config = Eagle3HeadConfig.from_target(
        target.config,
        draft_vocab_size=vocab.draft_vocab_size,
        aux_layer_ids=config.aux_layer_ids,
        variant="eagle2" if resolved_variant == "eagle2" else "eagle3",
    )
    if resolved_variant == "peagle":
        head_config = PEagleHeadConfig(
            **head_config.model_dump(), mask_token_id=default_mask_token_id(target.config)
        )
    head = new_head(head_config)
    head.load_target_embeddings(input_embedding_weight(target).float())
    head.set_draft_vocab(vocab.d2t, vocab.t2d)
    return head.to(target.device), vocab.coverage


# Draft vocabulary sizes tried when none is given; the lm_head's cost grows with the size,
# and a few thousand tokens cover nearly everything a chat model says.
_DRAFT_VOCAB_SIZES = (1024, 2048, 4096, 8192, 16384, 32000)
_DRAFT_VOCAB_COVERAGE = 0.999


def draft_vocab(samples: list[TokenizedConversation], size: int | None, vocab_size: int) -> DraftVocab:
    if size is not None:
        return build_draft_vocab(samples, draft_vocab_size=size, target_vocab_size=vocab_size)
    largest = min(vocab_size, _DRAFT_VOCAB_SIZES[-1])
    candidates = [s for s in _DRAFT_VOCAB_SIZES if s < largest] + [largest]
    for candidate in candidates:
        vocab = build_draft_vocab(samples, draft_vocab_size=candidate, target_vocab_size=vocab_size)
        if vocab.coverage >= _DRAFT_VOCAB_COVERAGE:
            break
    return vocab


def _coverage(t2d: torch.Tensor, samples: list[TokenizedConversation]) -> float | None:
    masked = [token for s in samples for token, bit in zip(s.input_ids, s.loss_mask, strict=True) if bit]
    if not masked:
        return None
    return float(t2d[torch.tensor(masked)].float().mean())


def export_best_head(config: TrainConfig, head: Eagle3DraftModel, best: Path | None) -> Path:
    """Export the head of the best held-out checkpoint (which may predate the last step)."""
    if best is not None:
        load_head_weights(best, head)
    return export_head(
        head,
        config.out_dir / HEAD_DIRNAME,
        dtype=DTYPES[config.export_dtype],
        trained_speculative_tokens=config.ttt_steps,
        verifier=str(config.model_dir),
    )
