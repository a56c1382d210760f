"""``TargetRunner``'s interface on the engine's slot pool: batch-1 decoding for GPUs.

On a GPU a batch-1 step of a small model is nothing but kernel launches and syncs. Here the
sequence's keys live in a one-slot preallocated pool (rolling back rejected drafts is only a
shorter length), and a one-token step replays a CUDA graph (``engine.cuda_graphs``). Greedy
verification stays lossless as vLLM's is: a draft is accepted only while it equals the
argmax of this very verify pass; against plain decoding the output can differ where a
different batch shape flips a near-tie in the last bits, which ``trainer eval`` reports as its
token agreement. Draft trees keep the exact runner (they fall back to a chain here).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import torch
from transformers import PreTrainedModel

from engine.cuda_graphs import GRAPHED_WIDTH
from engine.feature_recorder import GenerationRecorder
from engine.generation import batching_supported
from engine.runner import SlotRunner, key_length_for, pool_positions
from engine.slot_attention import SLOT_ATTENTION
from engine.target import TargetOutput


def slot_runner_wanted(model: PreTrainedModel, wanted: bool | None) -> bool:
    """``wanted`` if given, else: on CUDA, for targets without linear-attention layers."""
    if wanted is not None:
        return wanted
    return model.device.type == "cuda" and batching_supported(model)


class SlotTargetRunner:
    """One sequence at a time on a one-slot pool; plain and speculative decoding each keep
    their own runner (the speculative one records the head's features inside its graphs).

    The runners, their pools and graphs live as long as this object, but the model is the
    slot pool's only inside ``session()``: between sessions it has its own attention back and
    none of the recorder's hooks, so the caller's other work on it (a plain forward, a
    training step's features, ``generate``) runs as if no runner existed."""

    def __init__(self, model: PreTrainedModel, aux_layer_ids: Sequence[int] | None = None) -> None:
        self.model = model
        self.aux_layer_ids = list(aux_layer_ids) if aux_layer_ids is not None else None
        self._capacity = pool_positions(model) + 1
        self._runners: dict[bool, SlotRunner] = {}
        self._runner: SlotRunner | None = None
        self._length = 0

    def _runner_for(self, capture: bool) -> SlotRunner:
        runner = self._runners.get(capture)
        if runner is None:
            recorder = None
            if capture:
                assert self.aux_layer_ids is not None
                dtype = self.model.dtype
                # Its hooks are on the model during sessions only (session()); graphs captured
                # with them keep writing the features into their own output buffers.
                recorder = GenerationRecorder(
                    self.model, self.aux_layer_ids, aux_dtype=dtype, final_dtype=dtype
                )
            runner = SlotRunner(self.model, slots=1, capacity=self._capacity, recorder=recorder, graph_rows=1)
            self._runners[capture] = runner
        return runner

    @contextmanager
    def session(self, *, capture: bool) -> Iterator[SlotTargetRunner]:
        if capture and self.aux_layer_ids is None:
            raise ValueError("feature capture needs the aux layer ids of a draft head")
        previous = self.model.config._attn_implementation
        with ExitStack() as model_lent:
            model_lent.callback(self.model.set_attn_implementation, previous)
            runner = self._runner_for(capture)  # a new runner switches the model's attention itself
            self.model.set_attn_implementation(SLOT_ATTENTION)
            if isinstance(runner.recorder, GenerationRecorder):
                model_lent.enter_context(runner.recorder)
            self._runner, self._length = runner, 0
            try:
                yield self
            finally:
                self._runner = None

    @property
    def length(self) -> int:
        return self._length

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        logits_to_keep: int,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> TargetOutput:
        """Run ``input_ids`` [1, T] after the held positions; logits of the last ``logits_to_keep``."""
        if attention_mask is not None or position_ids is not None:
            raise ValueError("the slot-pool runner runs causal chains only (draft trees use TargetRunner)")
        runner = self._runner
        if runner is None:
            raise RuntimeError("SlotTargetRunner used outside session()")
        count = int(input_ids.shape[1])
        if self._length + count >= self._capacity:
            raise ValueError(
                f"a sequence of {self._length + count} positions does not fit {self._capacity - 1}"
            )
        positions = torch.arange(self._length, self._length + count, device=input_ids.device).unsqueeze(0)
        keys = key_length_for(self._length + count, self._capacity)
        if self._length and count <= GRAPHED_WIDTH:  # decode or verify (not a prompt): a graph on a GPU
            output = runner.decode(input_ids, positions, positions, key_length=keys)
        else:
            output = runner.forward(input_ids, positions, positions, slots=None, key_length=keys)
        self._length += count
        logits = runner.logits(output.hidden[0, -logits_to_keep:])
        return TargetOutput(logits=logits, aux_hidden_states=None if output.aux is None else output.aux[0])

    def enable_rollback(self) -> None:
        """Nothing to do: every position stays in the pool until overwritten."""

    def rollback(self, num_tokens: int) -> None:
        if not 0 <= num_tokens <= self._length:
            raise ValueError(f"cannot roll back {num_tokens} of {self._length} positions")
        self._length -= num_tokens

    def tree_unsupported_reason(self) -> str | None:
        return "draft trees run on the exact runner; the GPU slot-pool runner verifies chains"

    def keep(self, length: int, extra_positions: Sequence[int]) -> None:
        raise NotImplementedError(self.tree_unsupported_reason())
