"""Recording the target's features forward by forward while it writes replies.

Generation already runs the target over every prompt token (prefill) and every reply
token but the last (decode steps), so the aux-layer inputs and the final normed hidden
state a head trains on come out of it for free. Recording them saves a second target
pass over the same tokens, which costs as much as the prefill: on a CPU budget that is
a third or more of a distillation run.

The recorded features come from the model that generated (a bfloat16 copy on CPUs with
native bf16), as the training pass under bf16 autocast would compute them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle
from transformers import PreTrainedModel

from engine.capture import check_aux_layer_ids, decoder_layers, final_norm
from engine.hooks import ScopedHooks, layer_input
from engine.replies import SampleFeatures


class GenerationRecorder(ScopedHooks):
    """Context manager: records, forward by forward, the aux-layer inputs and the final
    norm's output of ``model`` while ``generate`` runs; ``row`` cuts one sequence out."""

    def __init__(
        self,
        model: PreTrainedModel,
        aux_layer_ids: Sequence[int],
        *,
        aux_dtype: torch.dtype,
        final_dtype: torch.dtype,
    ) -> None:
        super().__init__()
        layers = decoder_layers(model)
        self.aux_layer_ids = check_aux_layer_ids(aux_layer_ids, len(layers))
        norm = final_norm(model)
        if norm is None:
            raise ValueError(f"{type(model).__name__} has no final norm at model.model.norm to record")
        self._layers, self._norm = layers, norm
        self._aux_dtype, self._final_dtype = aux_dtype, final_dtype
        self._final: list[torch.Tensor] = []
        # Id N (EAGLE-2's feature) is the final norm's output, recorded once for both uses.
        self._aux: dict[int, list[torch.Tensor]] = {
            i: self._final if i == len(layers) else [] for i in self.aux_layer_ids
        }

    def _layer_hook(self, layer_id: int) -> Any:
        def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self._aux[layer_id].append(layer_input(layer_id, args, kwargs).detach().to(self._aux_dtype))

        return hook

    def _norm_hook(self, _module: nn.Module, _args: tuple[Any, ...], output: torch.Tensor) -> None:
        self._final.append(output.detach().to(self._final_dtype))

    def _register(self) -> Iterator[RemovableHandle]:
        for layer_id in self.aux_layer_ids:
            if layer_id == len(self._layers):
                continue
            yield self._layers[layer_id].register_forward_pre_hook(
                self._layer_hook(layer_id), with_kwargs=True
            )
        yield self._norm.register_forward_hook(self._norm_hook)

    @property
    def layout(self) -> tuple[object, ...]:
        return (tuple(self.aux_layer_ids), self._aux_dtype, self._final_dtype)

    def take_latest(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The latest forward's aux states [B, T, k*H] and final hidden [B, T, H], forgetting
        everything recorded so far (continuous batching reads each forward as it comes)."""
        if not self._final:
            raise RuntimeError("no forward has been recorded since the last take_latest()")
        aux = torch.cat([self._aux[i][-1].to(self._aux_dtype) for i in self.aux_layer_ids], dim=-1)
        final = self._final[-1]
        for states in self._aux.values():
            states.clear()
        self._final.clear()
        return aux, final

    def row(self, row: int, start: int, length: int, argmax_ids: torch.Tensor) -> SampleFeatures:
        """Positions ``start .. start+length-1`` of batch row ``row`` (columns of the padded
        generation, whose last token was never fed back: its features are zeros, and no loss
        reads them, since nothing follows it)."""
        aux = torch.cat(
            [torch.cat(self._aux[i], dim=1)[row].to(self._aux_dtype) for i in self.aux_layer_ids], dim=-1
        )
        final = torch.cat(self._final, dim=1)[row]
        recorded = aux.shape[0] - start
        aux_out = aux.new_zeros((length, aux.shape[-1]))
        final_out = final.new_zeros((length, final.shape[-1]))
        kept = min(recorded, length)
        aux_out[:kept] = aux[start : start + kept]
        final_out[:kept] = final[start : start + kept]
        # Kept in host memory with the sample for the whole run, whatever device recorded them.
        return SampleFeatures(
            aux_hidden_states=aux_out.cpu(), final_hidden=final_out.cpu(), argmax_ids=argmax_ids
        )
