"""The EAGLE-2 draft head: feature-level autoregression on the target's last hidden state.

Each step reads ``fc(cat(embed(token t+1), feature t))`` (2H -> H) and one Llama decoder
layer whose input norm is skipped, as in SafeAILab's EAGLE and vLLM's
``EagleLlamaForCausalLM``; its output is the predicted next *feature* (the target's last
hidden state after the final norm), which the target's own lm_head turns into a token.
So the head has no output norm and its lm_head is a frozen copy of the target's rows.

Everything else is the EAGLE-3 head's: the attention modes (cached, packed, TTT), the
draft vocabulary maps and the training loop, so the engine and trainer drive both alike.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

from engine.heads.config import Eagle3HeadConfig
from engine.heads.model import AttendFn, Eagle3Attention, Eagle3DraftModel, gather_positions


class Eagle2DecoderLayer(nn.Module):
    """A Llama decoder layer over the fused H-wide input, without an input norm."""

    def __init__(self, config: Eagle3HeadConfig) -> None:
        super().__init__()
        self.self_attn = Eagle3Attention(config, input_width=config.hidden_size)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = LlamaMLP(config.llama_config())  # type: ignore[no-untyped-call]

    def forward(
        self,
        fused: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attend: AttendFn,
        *,
        query_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        residual = fused if query_index is None else gather_positions(fused, query_index)
        attended: torch.Tensor = self.self_attn(fused, cos, sin, attend, query_index=query_index)
        hidden = residual + attended
        mlp_out: torch.Tensor = self.mlp(self.post_attention_layernorm(hidden))
        return hidden + mlp_out


class Eagle2DraftModel(Eagle3DraftModel):
    """``forward`` returns the predicted next feature; ``compute_logits`` is the target's lm_head on it."""

    def _build_body(self, config: Eagle3HeadConfig) -> None:
        # No bias: vLLM's EagleLlamaForCausalLM (0.32) builds fc without one and refuses a
        # checkpoint that has fc.bias, so a biased head could not be served there.
        self.fc = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)
        self.midlayer: nn.Module = Eagle2DecoderLayer(config)
        # The head predicts the target's *normed* last hidden state, which the target's
        # lm_head reads directly: nothing to normalise.
        self.norm: nn.Module = nn.Identity()

    def freeze_output_head(self) -> None:
        """The lm_head is the target's (copied in by ``init_head_from_target``), never trained:
        engines serve EAGLE-2 heads with the target's own lm_head."""
        self.lm_head.weight.requires_grad_(False)

    def fuse(self, aux_hidden_states: torch.Tensor) -> torch.Tensor:
        """The feature is used as it is; fc mixes it with the token embedding in every step."""
        return aux_hidden_states

    def _layer(
        self,
        input_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        attend: AttendFn,
        *,
        query_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        embeds = self.embed_tokens(input_ids).to(hidden.dtype)
        fused = self.fc(torch.cat([embeds, hidden], dim=-1))
        cos, sin = self.rotary_emb(hidden, position_ids)
        return self.midlayer(fused, cos, sin, attend, query_index=query_index)  # type: ignore[no-any-return]


def build_draft_model(config: Eagle3HeadConfig) -> Eagle3DraftModel:
    """An untrained head of the config's variant."""
    if config.variant == "eagle2":
        head = Eagle2DraftModel(config)
        head.freeze_output_head()
        return head
    return Eagle3DraftModel(config)
