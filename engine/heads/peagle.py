"""The P-EAGLE head: EAGLE-3's head drafting all K tokens from one forward (parallel drafting).

Slot 0 is an ordinary EAGLE-3 entry (fused target feature, embedding of the last token).
Slots 1..K-1 are *mask slots*: their hidden input is ``fc(mask_hidden)``, one learnt
[1, 1, 3*H_target] vector shared by every slot and applied before ``fc`` as if it were a
fused target feature, and their token is ``mask_token_id``, embedded with the target's own
table like any token. Positions keep counting, so slot j sits at position t+j and predicts
token t+2+j while attending to the context and to slots 1..j, all in one forward.

Everything else is the EAGLE-3 head (``Eagle3DraftModel``): fusion, the decoder layer, the
draft vocabulary, the caches. The layout is vLLM 0.32's: a native EAGLE-3 checkpoint plus a
``mask_hidden`` tensor, ``mask_token_id`` in the config, architecture ``PeagleLlamaForCausalLM``.
"""

from __future__ import annotations

import torch
from pydantic import Field, model_validator
from torch import nn
from transformers import PretrainedConfig

from engine.heads.config import Eagle3HeadConfig
from engine.heads.model import Eagle3DecoderLayer, Eagle3DraftModel, _rotate


class PEagleHeadConfig(Eagle3HeadConfig):
    """An EAGLE-3 head's shape plus the token its mask slots read."""

    mask_token_id: int = Field(
        description="Token id of the mask slots (vLLM's parallel-drafting token); embedded with the "
        "target's table."
    )

    @model_validator(mode="after")
    def _check_mask_token(self) -> PEagleHeadConfig:
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ValueError(
                f"mask_token_id {self.mask_token_id} must be in 0..vocab_size-1 ({self.vocab_size})"
            )
        return self


def default_mask_token_id(target: PretrainedConfig) -> int:
    """A special token of the target (pad, else EOS, else 0): never a draft the head must predict."""
    text = target.get_text_config()
    for name in ("pad_token_id", "eos_token_id", "bos_token_id"):
        value = getattr(text, name, None)
        if value is None:
            value = getattr(target, name, None)
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, int) and 0 <= value < int(text.vocab_size):
            return value
    return 0


class PEagleDraftModel(Eagle3DraftModel):
    """``Eagle3DraftModel`` with the mask slots' learnt hidden input."""

    config: PEagleHeadConfig

    def __init__(self, config: PEagleHeadConfig) -> None:
        super().__init__(config)
        # Small, like fc's inputs would be after hidden_norm rescales them; trained from here.
        self.mask_hidden = nn.Parameter(torch.randn(1, 1, 3 * config.target_hidden_size) * 0.02)

    def mask_inputs(
        self, count: int, *, dtype: torch.dtype | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs of ``count`` mask slots: token ids [count] and fused hidden states [count, H]."""
        device = self.mask_hidden.device
        ids = torch.full((count,), self.config.mask_token_id, dtype=torch.long, device=device)
        hidden = self.fuse(self.mask_hidden.to(dtype or self.mask_hidden.dtype))[0].expand(count, -1)
        return ids, hidden

    def mask_keys_values(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values the decoder layer gives mask slots at ``position_ids`` [B, A]:
        [B, kv_heads, A, D] each (keys rotated). With one layer they depend on the position
        only, since every mask slot has the same inputs."""
        # P-EAGLE builds on the EAGLE-3 decoder layer (only EAGLE-2 swaps the body).
        layer = self.midlayer
        assert isinstance(layer, Eagle3DecoderLayer)
        attention = layer.self_attn
        mask_id = torch.tensor([self.config.mask_token_id], device=position_ids.device)
        hidden = self.fuse(self.mask_hidden[0])  # [1, H]
        embeds = self.embed_tokens(mask_id).to(hidden.dtype)
        x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(hidden)], dim=-1)  # [1, 2H]
        batch, count = position_ids.shape
        shape = (attention.num_kv_heads, 1, attention.head_dim)
        keys = attention.k_proj(x).view(shape).unsqueeze(0).expand(batch, -1, count, -1)
        values = attention.v_proj(x).view(shape).unsqueeze(0).expand(batch, -1, count, -1)
        cos, sin = self.rotary_emb(hidden, position_ids)
        return _rotate(keys, cos, sin), values
