"""Capture the target's hidden states at the *input* of chosen decoder layers.

EAGLE-3 fuses three target features (low/mid/high layers). We read them with forward
pre-hooks on the decoder layers rather than ``output_hidden_states=True``: that keeps
only the three states we need instead of one per layer, and it works unchanged inside
any forward (a full prefill, a cached decode step, a verification pass).

Convention: the state captured for layer ``i`` is what layer ``i`` receives, which is
``hidden_states[i]`` of Hugging Face's ``output_hidden_states`` (vLLM's aux-layer ids).
Id ``N`` (one past the last layer) is ``hidden_states[N]``: the final norm's output, the
last hidden state EAGLE-2 reads; it is taken with a forward hook on that norm.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle
from transformers import PretrainedConfig, PreTrainedModel

from engine.hooks import ScopedHooks, layer_input

# Every architecture keeps its decoder layers at ``model.model.layers`` and calls each
# layer with the hidden state as the first argument; each one is tested in
# tests/engine/test_engine_capture.py against ``output_hidden_states``.
SUPPORTED_ARCHITECTURES: tuple[str, ...] = (
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "GptOssForCausalLM",
    "Qwen3NextForCausalLM",
)


class UnsupportedArchitectureError(ValueError):
    """The target's architecture has no tested hidden-state capture."""


def linear_attention_reason(config: PretrainedConfig) -> str | None:
    """Why the packed serving target (``PackedTarget``) cannot run this target, or None.

    It packs every sequence's new tokens into one row and keeps only key/value caches;
    linear-attention layers (Qwen3-Next) need a recurrent state per sequence, which the
    serving engine then keeps with one forward per sequence (``engine.recurrent_target``).
    """
    layer_types = getattr(config.get_text_config(), "layer_types", None) or []
    if "linear_attention" not in layer_types:
        return None
    architecture = (getattr(config, "architectures", None) or [config.model_type])[0]
    return (
        f"{architecture} has linear-attention layers, whose per-sequence recurrent state one packed "
        "row cannot hold; serve it through engine.recurrent_target.RecurrentTarget"
    )


def check_supported(config: PretrainedConfig) -> str:
    """The target's architecture name, or ``UnsupportedArchitectureError`` naming it."""
    architectures = list(getattr(config, "architectures", None) or [])
    if not architectures:
        raise UnsupportedArchitectureError(
            f"the model config declares no 'architectures' (model_type={config.model_type!r}); "
            f"supported architectures: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    architecture = str(architectures[0])
    if architecture not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedArchitectureError(
            f"architecture {architecture!r} is not supported for EAGLE training; "
            f"supported architectures: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    return architecture


def decoder_layers(model: PreTrainedModel) -> nn.ModuleList:
    """The target's decoder layers, in order."""
    base = getattr(model, "model", None)
    layers = getattr(base, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise UnsupportedArchitectureError(
            f"{type(model).__name__} has no decoder layers at model.model.layers; "
            f"supported architectures: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    return layers


def input_embedding_weight(model: PreTrainedModel) -> torch.Tensor:
    """The target's token embedding table [V, H] (the head shares it)."""
    embeddings = model.get_input_embeddings()
    if not isinstance(embeddings, nn.Embedding):
        raise UnsupportedArchitectureError(f"{type(model).__name__} has no nn.Embedding input embeddings")
    return embeddings.weight.detach()


def output_head(model: PreTrainedModel) -> nn.Linear:
    """The target's lm_head."""
    head = model.get_output_embeddings()  # type: ignore[no-untyped-call]
    if not isinstance(head, nn.Linear):
        raise UnsupportedArchitectureError(f"{type(model).__name__} has no linear lm_head")
    return head


def final_norm(model: PreTrainedModel) -> nn.Module | None:
    """The norm applied after the last decoder layer (``model.model.norm``), if any."""
    norm = getattr(getattr(model, "model", None), "norm", None)
    return norm if isinstance(norm, nn.Module) else None


def check_aux_layer_ids(aux_layer_ids: Sequence[int], num_layers: int, *, final: bool = True) -> list[int]:
    """Ids name the layer whose input is captured; with ``final``, id ``num_layers`` names the
    final norm's output (EAGLE-2's feature; engines never hand it to an EAGLE-3 head)."""
    ids = [int(i) for i in aux_layer_ids]
    top = num_layers if final else num_layers - 1
    bad = [i for i in ids if not 0 <= i <= top]
    if bad:
        what = f", {num_layers} the final norm's output" if final else ""
        raise ValueError(
            f"aux layer ids {bad} are out of range for a target with {num_layers} decoder layers "
            f"(valid: 0..{top}; id i < {num_layers} names the layer whose input is captured{what})"
        )
    return ids


def required_final_norm(model: PreTrainedModel) -> nn.Module:
    """The final norm, for the feature id one past the last layer."""
    norm = final_norm(model)
    if norm is None:
        raise UnsupportedArchitectureError(f"{type(model).__name__} has no final norm at model.model.norm")
    return norm


class TargetFeatureCapture(ScopedHooks):
    """Context manager: while open, each forward of ``model`` records the inputs of the
    aux layers. ``aux_hidden_states()`` returns those of the latest forward, concatenated
    in ``aux_layer_ids`` order: [B, T, len(aux_layer_ids) * H].

    >>> with TargetFeatureCapture(model, [2, 15, 27]) as capture:
    ...     out = model(input_ids)
    ...     aux = capture.aux_hidden_states()
    """

    def __init__(self, model: PreTrainedModel, aux_layer_ids: Sequence[int], *, detach: bool = True) -> None:
        super().__init__()
        self._model = model
        self._layers = decoder_layers(model)
        self.aux_layer_ids = check_aux_layer_ids(aux_layer_ids, len(self._layers))
        # Captured states are read, never trained through: detaching keeps the target's
        # autograd graph from being held alive by the capture.
        self._detach = detach
        self._states: dict[int, torch.Tensor] = {}

    def _hook_for(self, layer_id: int) -> Any:
        def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            hidden = layer_input(layer_id, args, kwargs)
            self._states[layer_id] = hidden.detach() if self._detach else hidden

        return hook

    def _final_hook_for(self, layer_id: int) -> Any:
        def hook(_module: nn.Module, _args: tuple[Any, ...], output: torch.Tensor) -> None:
            self._states[layer_id] = output.detach() if self._detach else output

        return hook

    def _register(self) -> Iterator[RemovableHandle]:
        for layer_id in dict.fromkeys(self.aux_layer_ids):
            if layer_id == len(self._layers):
                norm = required_final_norm(self._model)
                yield norm.register_forward_hook(self._final_hook_for(layer_id))
                continue
            layer = self._layers[layer_id]
            yield layer.register_forward_pre_hook(self._hook_for(layer_id), with_kwargs=True)

    def clear(self) -> None:
        """Forget captured states (they are overwritten by the next forward anyway)."""
        self._states.clear()

    def layer_hidden_state(self, layer_id: int) -> torch.Tensor:
        """The captured input of one aux layer, [B, T, H]."""
        if layer_id not in self._states:
            raise RuntimeError(
                f"no hidden state captured for layer {layer_id}: run a forward of the target "
                "inside the capture context first"
            )
        return self._states[layer_id]

    def aux_hidden_states(self) -> torch.Tensor:
        """The latest forward's aux states fused along the feature axis, [B, T, k*H]."""
        return torch.cat([self.layer_hidden_state(i) for i in self.aux_layer_ids], dim=-1)
