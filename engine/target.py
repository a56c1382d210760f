"""The target model behind one KV cache: prefill, decode, verify and roll back.

Plain and speculative decoding both run the target through this class, so the baseline
a speedup is measured against pays exactly the same per-forward cost.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer

from engine.capture import TargetFeatureCapture
from engine.cpu_sdpa import ensure_cpu_sdpa
from engine.recurrent_state import ForwardSnapshot, has_recurrent_state, snapshot, undo_last_tokens


@dataclass(frozen=True, slots=True)
class TargetOutput:
    logits: torch.Tensor  # [T_kept, V] for the last T_kept positions of the forward
    aux_hidden_states: torch.Tensor | None  # [T, 3H] EAGLE-3 features of every position, if captured


class TargetRunner:
    """Owns the target's ``DynamicCache`` for one sequence (batch 1).

    ``session()`` starts an empty cache (and, for speculative decoding, the feature
    capture); ``forward`` appends tokens to the cache; ``rollback`` forgets the last
    positions, e.g. rejected drafts after a verification. A target with recurrent state
    (linear attention) is rolled back by restoring the state from before the last forward
    and running the kept tokens again (``engine.recurrent_state``).
    """

    def __init__(self, model: PreTrainedModel, aux_layer_ids: Sequence[int] | None = None) -> None:
        self.model = model
        # Verifications and trees pass a mask: on a CPU, attend without copying the cache per
        # query head (engine.cpu_sdpa; what the serving engine's packed attention does too).
        ensure_cpu_sdpa(model)
        self.aux_layer_ids = list(aux_layer_ids) if aux_layer_ids is not None else None
        self._cache: DynamicCache | None = None
        self._capture: TargetFeatureCapture | None = None
        self._recurrent = False
        self._rollback_enabled = False
        self._last_forward: ForwardSnapshot | None = None

    @contextmanager
    def session(self, *, capture: bool) -> Iterator[TargetRunner]:
        """A fresh cache for one generation; hooks for feature capture only when asked,
        so plain decoding runs the bare model."""
        if capture and self.aux_layer_ids is None:
            raise ValueError("feature capture needs the aux layer ids of a draft head")
        with ExitStack() as stack:
            self._cache = DynamicCache(config=self.model.config)
            self._recurrent = has_recurrent_state(self._cache)
            self._rollback_enabled = False
            self._last_forward = None
            if capture:
                assert self.aux_layer_ids is not None
                self._capture = stack.enter_context(TargetFeatureCapture(self.model, self.aux_layer_ids))
            try:
                yield self
            finally:
                self._cache = None
                self._capture = None
                self._last_forward = None

    @property
    def length(self) -> int:
        """Positions held in the cache."""
        return self._require_cache().get_seq_length()

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        logits_to_keep: int,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> TargetOutput:
        """Run ``input_ids`` [1, T] after the cached positions; logits of the last ``logits_to_keep``.

        Causal by default; a draft tree passes its own boolean ``attention_mask``
        [1, 1, T, cached + T] and ``position_ids`` [1, T].
        """
        if self._recurrent and self._rollback_enabled:
            self._last_forward = snapshot(self._require_cache(), input_ids)
        outputs = self.model(
            input_ids=input_ids,
            past_key_values=self._require_cache(),
            use_cache=True,
            logits_to_keep=logits_to_keep,
            attention_mask=attention_mask,
            position_ids=position_ids,
        )
        aux = self._capture.aux_hidden_states()[0] if self._capture is not None else None
        return TargetOutput(logits=outputs.logits[0], aux_hidden_states=aux)

    def enable_rollback(self) -> None:
        """Let sliding-window layers keep what a later ``rollback`` may need.

        Called after the prefill so that a long prompt is not held in full by layers
        that would otherwise drop everything outside their window.
        """
        self._require_cache().activate_past_recording()  # type: ignore[no-untyped-call]
        self._rollback_enabled = True

    def rollback(self, num_tokens: int) -> None:
        """Forget the last ``num_tokens`` positions; with 0, only trims sliding windows."""
        if num_tokens < 0:
            raise ValueError(f"cannot roll back a negative number of tokens ({num_tokens})")
        cache = self._require_cache()
        if not self._recurrent or num_tokens == 0:
            cache.crop(-num_tokens)
            return
        last = self._last_forward
        if last is None or num_tokens > last.input_ids.shape[1]:
            raise RuntimeError(
                f"cannot roll back {num_tokens} tokens of a recurrent target: only the last forward "
                "(after enable_rollback) can be undone"
            )
        undo_last_tokens(self.model, cache, last, num_tokens)
        self._last_forward = None

    def tree_unsupported_reason(self) -> str | None:
        """Why draft trees cannot run on this target, or None when they can. Trees keep an
        arbitrary subset of the verified positions, which only a full-attention cache can
        do (sliding-window layers have already dropped positions, and the tree's mask
        would have to apply each layer's window)."""
        cache = DynamicCache(config=self.model.config)
        architecture = (getattr(self.model.config, "architectures", None) or ["this target"])[0]
        if has_recurrent_state(cache):
            return f"draft trees need full-attention layers; {architecture} has linear-attention ones"
        if any(type(layer) is not DynamicLayer for layer in cache.layers):
            return f"draft trees need full-attention layers; {architecture} has sliding-window ones"
        return None

    def keep(self, length: int, extra_positions: Sequence[int]) -> None:
        """Keep the first ``length`` positions and then ``extra_positions`` (ascending), in
        that order; forget the rest. After a tree verification: the accepted path."""
        cache = self._require_cache()
        index = torch.tensor([*range(length), *extra_positions], dtype=torch.long, device=self.model.device)
        for layer in cache.layers:
            if not isinstance(layer, DynamicLayer):
                raise TypeError(f"cannot keep positions of a {type(layer).__name__} cache layer")
            if layer.keys is not None and layer.values is not None and layer.keys.numel():
                layer.keys = layer.keys.index_select(-2, index)
                layer.values = layer.values.index_select(-2, index)

    def _require_cache(self) -> DynamicCache:
        if self._cache is None:
            raise RuntimeError("TargetRunner used outside session()")
        return self._cache
