"""Runs the target's decoder over a padded batch with slot attention, and its LM head on the
positions a caller asks for."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from engine.cuda_graphs import DecodeGraphs, graphs_wanted
from engine.kv_pool import SlotKVPool
from engine.packed_linear import small_products_packed
from engine.replies import FeatureRecorder
from engine.slot_attention import SLOT_ATTENTION, SlotStep, slot_step, visible_keys


def attention_windows(model: PreTrainedModel) -> list[int | None]:
    """The sliding windows the model's layers use (None: full attention), one mask each."""
    text = model.config.get_text_config()
    window = getattr(text, "sliding_window", None)
    layer_types = getattr(text, "layer_types", None) or []
    sliding = any(kind == "sliding_attention" for kind in layer_types) or bool(
        getattr(text, "use_sliding_window", False)
    )
    return [None, int(window)] if sliding and window else [None]


# Products of up to this many rows (decode and verify steps, not prefills) run on packed
# weights on a CPU: where the packed layout stops winning (engine.packed_linear).
MAX_PACKED_ROWS = 128

# A sequence's room in a serving or decoding pool: the model's context, up to this (the pool's
# memory grows with it).
MAX_POOL_POSITIONS = 8192


def pool_positions(model: PreTrainedModel) -> int:
    text = model.config.get_text_config()
    return min(int(getattr(text, "max_position_embeddings", MAX_POOL_POSITIONS)), MAX_POOL_POSITIONS)


def num_decoder_layers(model: PreTrainedModel) -> int:
    return int(model.config.get_text_config().num_hidden_layers)


@dataclass(frozen=True, slots=True)
class StepOutput:
    hidden: torch.Tensor  # [B, Q, H] after the final norm
    aux: torch.Tensor | None  # [B, Q, A] the recorder's aux-layer features, if recording
    final: torch.Tensor | None  # [B, Q, H] the recorder's final hidden states, if recording

    def rows(self, count: int) -> StepOutput:
        """The first ``count`` rows (a graph's outputs are padded to its bucket)."""
        return StepOutput(
            self.hidden[:count],
            None if self.aux is None else self.aux[:count],
            None if self.final is None else self.final[:count],
        )


class SlotRunner:
    """The target switched to slot attention over its own pool, while attached (from creation
    until ``detach`` or ``close``).

    ``detach`` and ``close`` put the model's attention implementation and linear layers back:
    later code (``generate``, the training pass) sees the model as it was handed in."""

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        slots: int,
        capacity: int,
        recorder: FeatureRecorder | None = None,
        graph_rows: int | None = None,
    ) -> None:
        self.model, self.recorder = model, recorder
        # The decoder stack without the LM head: logits are computed only where a caller needs
        # them (a padded prefill's last real positions), not over every position.
        decoder = getattr(model, "model", None)
        head = model.get_output_embeddings()  # type: ignore[no-untyped-call]
        if not isinstance(decoder, torch.nn.Module) or not isinstance(head, torch.nn.Module):
            raise ValueError(f"{type(model).__name__} has no model.model decoder and LM head to run")
        self.decoder = decoder
        self.windows = attention_windows(model)
        self.pool = SlotKVPool(num_decoder_layers(model), slots, capacity, model.device)
        self._key_limit: int | None = None
        self._previous_attention = model.config._attn_implementation
        self._packing = ExitStack()
        self.attached = False
        self.head: torch.nn.Module = head
        # Decode steps over the first ``graph_rows`` slots replay CUDA graphs on a GPU. Captured
        # lazily, a bucket at a time, and kept while the runner lives: a runner that is
        # detached and attached again (``engine.runner_cache``) replays them without capturing.
        self.graphs = (
            DecodeGraphs(self, graph_rows)
            if graph_rows is not None and graphs_wanted(self.pool.device, model.config)
            else None
        )
        self.attach()  # last, so nothing above can fail with the model changed

    @property
    def key_limit(self) -> int:
        """The most keys a step reads: the pool's positions, or fewer where ``limit_keys`` said
        so. A runner reused by a run that needs fewer positions than its pool holds
        (``engine.runner_cache``) then reads, and buckets its graphs by, as many keys as a
        runner of the run's own size would: its replies do not depend on which runner ran it."""
        return self.pool.capacity if self._key_limit is None else min(self._key_limit, self.pool.capacity)

    def limit_keys(self, positions: int | None) -> None:
        """Read at most ``positions`` keys a step from now on (None: the whole pool)."""
        self._key_limit = positions

    def attach(self) -> None:
        """Switch the model to slot attention over this runner's pool (and, for a float32 target
        on a CPU, packed decode-sized products); ``__init__`` does it once."""
        if self.attached:
            return
        model = self.model
        self._previous_attention = model.config._attn_implementation
        model.set_attn_implementation(SLOT_ATTENTION)
        try:
            # A float32 target on a CPU runs its decode-sized products on packed weights while
            # the runner is attached (engine.packed_linear says what that wins; this path is not
            # bit-exact with batch-1 decoding anyway).
            self._packing.enter_context(small_products_packed(model, max_packed_rows=MAX_PACKED_ROWS))
        except BaseException:
            model.set_attn_implementation(self._previous_attention)
            raise
        # The head as the model holds it now: packed, where packing applies.
        self.head = model.get_output_embeddings()  # type: ignore[no-untyped-call]
        self.attached = True

    def detach(self) -> None:
        """Put the model's attention implementation and linear layers back, keeping the pool
        and the graphs for a later ``attach``: code in between sees the model as handed in."""
        if not self.attached:
            return
        self.model.set_attn_implementation(self._previous_attention)
        self._packing.close()
        self.attached = False

    def close(self) -> None:
        self.detach()
        # The graphs point back at this runner: without this cycle broken, the pool and the
        # graphs' memory (GBs on a GPU at 256 rows) would wait for a full garbage collection.
        self.graphs = None

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        write_positions: torch.Tensor,
        *,
        slots: torch.Tensor | None,
        key_length: int,
    ) -> StepOutput:
        """The final hidden states [B, Q, H] of ``input_ids`` [B, Q] at ``positions``, and the
        recorder's features of every position.

        New keys go to ``write_positions`` of each row's slot (``slots`` [B]; None: row b is
        slot b). Queries see keys up to their position, within the first ``key_length``."""
        batch = input_ids.shape[0]
        rows = (torch.arange(batch, device=input_ids.device) if slots is None else slots).unsqueeze(1)
        masks = {window: visible_keys(positions, key_length, window) for window in self.windows}
        step = SlotStep(
            pool=self.pool,
            rows=rows,
            write_positions=write_positions,
            key_length=key_length,
            masks=masks,
            contiguous=slots is None,
        )
        with slot_step(step):
            outputs = self.decoder(input_ids=input_ids, position_ids=positions, use_cache=False)
        hidden: torch.Tensor = outputs.last_hidden_state
        if self.recorder is None:
            return StepOutput(hidden, None, None)
        aux, final = self.recorder.take_latest()
        return StepOutput(hidden, aux, final)

    def decode(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        write_positions: torch.Tensor,
        *,
        key_length: int,
        slots: torch.Tensor | None = None,
    ) -> StepOutput:
        """A short step [R, W] (one token a row to decode, the pending token and K drafts to
        verify) for slots ``slots`` [R] (None: the first R slots, row r is slot r): a graph
        replay where graphs are on, else ``forward``."""
        if self.graphs is not None:
            return self.graphs.run(input_ids, positions, write_positions, key_length, slots)
        return self.forward(input_ids, positions, write_positions, slots=slots, key_length=key_length)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits [R, V] of final hidden states [R, H]."""
        logits: torch.Tensor = self.head(hidden)
        return logits.float()


def key_length_for(longest: int, capacity: int, multiple: int = 32) -> int:
    """Keys a step attends to: the longest row's, rounded up so few distinct shapes occur."""
    return min(capacity, -(-longest // multiple) * multiple)


def batch_rows_for(highest_slot: int, slots: int, multiple: int = 1) -> int:
    """Rows a decode step runs: up to the highest busy slot (CUDA graphs round up themselves)."""
    return min(slots, -(-(highest_slot + 1) // multiple) * multiple)


def pad_rows(rows: Sequence[Sequence[int]], pad: int) -> list[list[int]]:
    width = max(len(row) for row in rows)
    return [list(row) + [pad] * (width - len(row)) for row in rows]


def padding_groups(lengths: Sequence[int], *, max_tokens: int, waste: float = 1.25) -> list[list[int]]:
    """Indices of ``lengths`` in groups to run as one right-padded batch each: sorted by length,
    a group grows while its padded size stays within ``waste`` times its tokens (plus a row's
    worth of slack) and within ``max_tokens``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    for index in order:
        group = groups[-1] if groups else None
        if group is not None:
            rows, longest = len(group) + 1, lengths[index]
            tokens = sum(lengths[i] for i in group) + longest
            if rows * longest <= waste * tokens + 32 and rows * longest <= max_tokens:
                group.append(index)
                continue
        groups.append([index])
    return groups
