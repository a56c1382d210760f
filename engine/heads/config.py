"""Shape of an EAGLE draft head, derived from its target model's config.

The head is one Llama-style decoder layer whose width follows the target, so the
same config serves every supported target architecture (vLLM and SGLang load all of
them as ``LlamaForCausalLMEagle3``, or ``EagleLlamaForCausalLM`` for an EAGLE-2 head).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from transformers import LlamaConfig, PretrainedConfig

# The aux-layer ids follow vLLM's convention: the hidden state at the *input* of that
# target decoder layer. SGLang reads ids as outputs-of-layer and adds one; we always
# write the convention into the exported config so nobody has to guess.
AUX_LAYER_ID_CONVENTION = "input_of_layer"


def default_aux_layer_ids(num_target_layers: int) -> list[int]:
    """EAGLE-3's low/mid/high feature taps: layers 2, N//2 and N-3."""
    if num_target_layers < 4:
        raise ValueError(f"EAGLE-3 needs a target with at least 4 decoder layers, got {num_target_layers}")
    return [2, num_target_layers // 2, num_target_layers - 3]


# What EAGLE_VARIANT names. A P-EAGLE head is an EAGLE-3 head with mask slots, so a head's
# config records only its family (HeadFamily) and P-EAGLE's extra fields (engine.heads.peagle).
DraftVariant = Literal["eagle3", "eagle2", "peagle"]
HeadFamily = Literal["eagle3", "eagle2"]

# Architectures whose default head is EAGLE-2, as SageMaker's own optimization jobs choose.
_EAGLE2_BY_DEFAULT = ("Qwen3NextForCausalLM",)


def default_variant(architecture: str) -> DraftVariant:
    """The draft variant a job trains when it names none."""
    return "eagle2" if architecture in _EAGLE2_BY_DEFAULT else "eagle3"


def final_feature_layer_id(num_target_layers: int) -> int:
    """EAGLE-2's single feature: id N, transformers' ``output_hidden_states[N]``, the target's
    last hidden state after its final norm (what its lm_head reads and vLLM hands an EAGLE head)."""
    return num_target_layers


def default_feature_layer_ids(variant: DraftVariant, num_target_layers: int) -> list[int]:
    """The target features a new head of ``variant`` reads."""
    if variant == "eagle2":
        return [final_feature_layer_id(num_target_layers)]
    return default_aux_layer_ids(num_target_layers)


def _full_rotary(rope: dict[str, Any] | None) -> dict[str, Any]:
    """The target's RoPE settings for the head's Llama layer, which rotates its whole head
    dimension: a target that rotates only part of it (Qwen3-Next) keeps its theta and scaling."""
    settings = dict(rope or {"rope_type": "default", "rope_theta": 10000.0})
    settings.pop("partial_rotary_factor", None)
    return settings


class Eagle3HeadConfig(BaseModel):
    """Every dimension of a draft head; serialised into checkpoints and exports."""

    variant: HeadFamily = Field(
        default="eagle3",
        description="eagle3: fc fuses three target layers, one decoder layer, its own lm_head over the "
        "draft vocabulary. eagle2: fc(cat(embedding, feature)) on the target's last hidden state, one "
        "decoder layer, the target's lm_head (frozen).",
    )
    hidden_size: int = Field(description="Width of the draft decoder layer (the target's hidden size).")
    target_hidden_size: int = Field(description="Hidden size of the target; fc fuses 3 of these.")
    intermediate_size: int = Field(description="SwiGLU width of the draft MLP (the target's).")
    num_attention_heads: int = Field(description="Query heads of the draft attention.")
    num_key_value_heads: int = Field(description="Key/value heads of the draft attention (GQA).")
    head_dim: int = Field(description="Width of one attention head.")
    rms_norm_eps: float = Field(description="Epsilon of every RMSNorm in the head.")
    rope_parameters: dict[str, Any] = Field(description="RoPE settings copied from the target.")
    max_position_embeddings: int = Field(description="Longest position the rotary tables cover.")
    vocab_size: int = Field(description="Target vocabulary size (embedding rows, t2d length).")
    draft_vocab_size: int = Field(description="Rows of the draft lm_head; d2t length.")
    aux_layer_ids: list[int] = Field(
        description="Target layers whose *input* hidden states are fused (vLLM convention); "
        "EAGLE-2 reads one, N: the last hidden state after the final norm."
    )
    hidden_act: str = Field(default="silu", description="Activation of the SwiGLU MLP.")
    target_architecture: str = Field(default="", description="Target's architecture, for validation.")

    @model_validator(mode="after")
    def _check_shapes(self) -> Eagle3HeadConfig:
        wanted = 1 if self.variant == "eagle2" else 3
        if len(self.aux_layer_ids) != wanted:
            raise ValueError(
                f"aux_layer_ids must name {wanted} target layer(s) for {self.variant}, "
                f"got {self.aux_layer_ids}"
            )
        if self.variant == "eagle2" and self.target_hidden_size != self.hidden_size:
            raise ValueError("an eagle2 head is as wide as its target (target_hidden_size == hidden_size)")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if not 0 < self.draft_vocab_size <= self.vocab_size:
            raise ValueError(
                f"draft_vocab_size {self.draft_vocab_size} must be in 1..vocab_size ({self.vocab_size})"
            )
        return self

    @classmethod
    def from_target(
        cls,
        target: PretrainedConfig,
        *,
        draft_vocab_size: int,
        aux_layer_ids: list[int] | None = None,
        variant: HeadFamily = "eagle3",
    ) -> Eagle3HeadConfig:
        text = target.get_text_config()
        heads = int(text.num_attention_heads)
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
        architectures = getattr(target, "architectures", None) or [""]
        return cls(
            variant=variant,
            hidden_size=text.hidden_size,
            target_hidden_size=text.hidden_size,
            intermediate_size=text.intermediate_size,
            num_attention_heads=heads,
            num_key_value_heads=getattr(text, "num_key_value_heads", None) or heads,
            head_dim=head_dim,
            rms_norm_eps=float(getattr(text, "rms_norm_eps", 1e-6)),
            rope_parameters=_full_rotary(text.rope_parameters),
            max_position_embeddings=int(text.max_position_embeddings),
            vocab_size=text.vocab_size,
            draft_vocab_size=draft_vocab_size,
            aux_layer_ids=aux_layer_ids or default_feature_layer_ids(variant, text.num_hidden_layers),
            hidden_act=getattr(text, "hidden_act", "silu"),
            target_architecture=architectures[0],
        )

    def llama_config(self) -> LlamaConfig:
        """The one-layer Llama config whose modules (rotary, MLP) the head reuses."""
        return LlamaConfig(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            num_hidden_layers=1,
            rms_norm_eps=self.rms_norm_eps,
            rope_parameters=dict(self.rope_parameters),
            max_position_embeddings=self.max_position_embeddings,
            vocab_size=self.vocab_size,
            hidden_act=self.hidden_act,
            mlp_bias=False,
            attention_bias=False,
        )
