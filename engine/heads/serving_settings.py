"""How many draft tokens to serve an exported head with, in the keys the engines read.

A head's ``config.json`` stays in the native EAGLE-3 format (``LlamaForCausalLMEagle3``,
``model_type: llama``), which vLLM and SGLang both load as a draft model. On top of it the
export writes the keys of the speculators format (vllm-project/speculators):

- ``speculators_config.proposal_methods[0].speculative_tokens``: the K vLLM serves with when
  it is given the head directory itself (``vllm serve <head dir>``): it takes the first
  proposal method's ``speculative_tokens`` as ``num_speculative_tokens`` and the verifier's
  ``name_or_path`` as the model to serve;
- ``speculators_model_type``, ``transformer_layer_config`` and ``speculators_config.verifier``,
  without which vLLM refuses the format.

The native config keeps ``model_type: llama``, so vLLM still loads the head as a Llama
EAGLE-3 draft (not through the speculators config class) on either path. SGLang takes K only
from its launch flags, so ``eaglenest.serve_with`` spells out SGLang's flags and vLLM's
``--speculative-config`` for that K. ``eaglenest.speculative_tokens`` records both numbers:
the draft positions training unrolled (TTT steps) and the K the job's benchmark recommends.
Until a benchmark has recommended one, the served K is the trained one (as speculators'
own trainer writes it).
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SPECULATORS_MODEL_TYPE = "eagle3"
PEAGLE_SPECULATORS_MODEL_TYPE = "peagle"
# The native architecture of a P-EAGLE head (engine.heads.head_format writes it).
PEAGLE_ARCHITECTURE = "PeagleLlamaForCausalLM"
PROPOSAL_TYPE = "greedy"  # one chain of K drafts, top-1 acceptance: what the engines verify
# A head exported without training (random_head) still needs a K for the format to be valid.
DEFAULT_SPECULATIVE_TOKENS = 3
# The native config's fields that describe the one decoder layer (speculators'
# transformer_layer_config is a Llama config of exactly that layer).
_LAYER_FIELDS = (
    "model_type",
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "rms_norm_eps",
    "max_position_embeddings",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "attention_bias",
    "mlp_bias",
    "vocab_size",
    "tie_word_embeddings",
    "torch_dtype",
)


class SpeculativeTokens(BaseModel):
    """The draft-token counts a head's config records (``eaglenest.speculative_tokens``)."""

    model_config = ConfigDict(frozen=True)

    trained: int | None = Field(
        ge=1, description="Draft positions training-time test unrolled; None for an untrained head."
    )
    recommended: int | None = Field(
        default=None,
        ge=1,
        description="K the job's benchmark recommends; None before a benchmark, or when it measured "
        "no fixed K for this head.",
    )
    recommended_at_concurrency: int | None = Field(
        default=None, description="The concurrency level whose fastest K was taken."
    )
    by_concurrency: dict[int, int] = Field(
        default_factory=dict, description="The head's fastest fixed K at each benchmarked concurrency level."
    )
    reason: str = Field(default="", description="How the served K was chosen, in words.")

    @property
    def served(self) -> int:
        """The K written where the engines read it."""
        return self.recommended or self.trained or DEFAULT_SPECULATIVE_TOKENS


def with_serving_settings(
    config: dict[str, Any], tokens: SpeculativeTokens, *, verifier_name_or_path: str | None
) -> dict[str, Any]:
    """A copy of a native head ``config`` with every serving key set for ``tokens``.

    Idempotent: applying it to its own output with the same arguments changes nothing, so a
    redelivered publish step writes the same bytes.
    """
    updated = copy.deepcopy(config)
    eaglenest = updated.setdefault("eaglenest", {})
    architecture = eaglenest.get("target_architecture") or ""
    k = tokens.served
    # A P-EAGLE head (PeagleLlamaForCausalLM): vLLM reads speculators type "peagle" as
    # EAGLE-3 with parallel drafting; SGLang has no parallel drafting to serve it with.
    parallel = config.get("architectures") == [PEAGLE_ARCHITECTURE]
    algorithm = PEAGLE_SPECULATORS_MODEL_TYPE if parallel else SPECULATORS_MODEL_TYPE
    updated["speculators_model_type"] = algorithm
    updated["transformer_layer_config"] = {name: config[name] for name in _LAYER_FIELDS if name in config}
    updated["speculators_config"] = {
        "algorithm": algorithm,
        "proposal_methods": [
            {
                "proposal_type": PROPOSAL_TYPE,
                "speculative_tokens": k,
                "verifier_accept_k": 1,
                "accept_tolerance": 0.0,
            }
        ],
        "default_proposal_method": PROPOSAL_TYPE,
        "verifier": {
            "name_or_path": verifier_name_or_path,
            "architectures": [architecture] if architecture else [],
        },
    }
    eaglenest["speculative_tokens"] = tokens.model_dump(mode="json")
    if parallel:
        eaglenest["serve_with"] = {
            "vllm_speculative_config": {
                "method": "eagle3",
                "parallel_drafting": True,
                "num_speculative_tokens": k,
            }
        }
        return updated
    eaglenest["serve_with"] = {
        "vllm_speculative_config": {"method": "eagle3", "num_speculative_tokens": k},
        # A chain of K drafts: K steps, one candidate each, K drafts + the verified token.
        "sglang_flags": {
            "--speculative-algorithm": "EAGLE3",
            "--speculative-num-steps": k,
            "--speculative-eagle-topk": 1,
            "--speculative-num-draft-tokens": k + 1,
        },
    }
    return updated


def served_speculative_tokens(config: dict[str, Any]) -> int:
    """K as vLLM reads it: the first proposal method's ``speculative_tokens``."""
    try:
        value = config["speculators_config"]["proposal_methods"][0]["speculative_tokens"]
    except (KeyError, IndexError, TypeError) as error:
        raise ValueError(
            "the head config has no speculators_config.proposal_methods[0].speculative_tokens"
        ) from error
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            f"speculators_config.proposal_methods[0].speculative_tokens must be >= 1, got {value!r}"
        )
    return value


def recorded_speculative_tokens(config: dict[str, Any]) -> SpeculativeTokens:
    """``eaglenest.speculative_tokens`` of a head config (trained and recommended K)."""
    eaglenest = config.get("eaglenest")
    recorded = eaglenest.get("speculative_tokens") if isinstance(eaglenest, dict) else None
    if not isinstance(recorded, dict):
        raise ValueError("the head config has no eaglenest.speculative_tokens")
    return SpeculativeTokens.model_validate(recorded)
