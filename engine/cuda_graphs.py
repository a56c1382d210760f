"""CUDA graphs of the decode step: one captured forward per (rows, keys) bucket, replayed.

A decode step of a small model is launch-bound on a GPU: hundreds of tiny kernels, each a few
microseconds of host time, around a fraction of a millisecond of work. A graph replays the
whole step with one launch. Shapes must not change between replays, so rows and keys are
rounded up to powers of two (a handful of graphs per run); the padding rows write their keys
to the pool's scratch position and are cut from the outputs. Features the recorder takes are
computed inside the graph, so they come back as the graph's own output buffers.

Mixture-of-experts targets route tokens with data-dependent shapes, which a graph cannot hold:
they decode eagerly.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from engine.runner import SlotRunner, StepOutput

logger = logging.getLogger(__name__)

DISABLE = "EAGLENEST_CUDA_GRAPHS"  # set to 0 to decode eagerly on CUDA too


def graphs_enabled(device: torch.device) -> bool:
    """Whether steps on ``device`` may be captured: CUDA, and not turned off."""
    return device.type == "cuda" and os.environ.get(DISABLE, "1") != "0"


def graphs_wanted(device: torch.device, config: object) -> bool:
    """Whether decode steps on ``device`` should be captured (CUDA, a dense target, not disabled)."""
    text = getattr(config, "get_text_config", lambda: config)()
    experts = getattr(text, "num_local_experts", None) or getattr(text, "num_experts", None)
    return graphs_enabled(device) and not experts


def power_of_two_at_least(value: int, floor: int) -> int:
    size = floor
    while size < value:
        size *= 2
    return size


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    input_ids: torch.Tensor  # [rows, 1]
    positions: torch.Tensor  # [rows, 1]
    write_positions: torch.Tensor  # [rows, 1]
    output: StepOutput


class DecodeGraphs:
    """The decode graphs of one runner, sharing one memory pool."""

    def __init__(self, runner: SlotRunner, max_rows: int) -> None:
        self.runner, self.max_rows = runner, max_rows
        self._graphs: dict[tuple[int, int], _Graph] = {}
        self._memory = torch.cuda.graph_pool_handle()

    def bucket(self, rows: int, key_length: int) -> tuple[int, int]:
        return (
            min(self.max_rows, power_of_two_at_least(rows, 8)),
            min(self.runner.pool.capacity, power_of_two_at_least(key_length, 64)),
        )

    def run(
        self, input_ids: torch.Tensor, positions: torch.Tensor, write_positions: torch.Tensor, key_length: int
    ) -> StepOutput:
        rows = input_ids.shape[0]
        key = self.bucket(rows, key_length)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._capture(*key)
        graph.input_ids[:rows].copy_(input_ids)
        graph.positions[:rows].copy_(positions)
        graph.write_positions[:rows].copy_(write_positions)
        # Padding rows must not write where an earlier, larger call's rows did.
        graph.write_positions[rows:].fill_(self.runner.pool.scratch)
        graph.graph.replay()
        return graph.output.rows(rows)

    def _capture(self, rows: int, key_length: int) -> _Graph:
        device, scratch = self.runner.pool.device, self.runner.pool.scratch
        # Padding rows (and the warm-up) write only to the scratch position: harmless to the pool.
        input_ids = torch.zeros((rows, 1), dtype=torch.long, device=device)
        positions = torch.zeros((rows, 1), dtype=torch.long, device=device)
        write_positions = torch.full((rows, 1), scratch, dtype=torch.long, device=device)
        # Warm up on a side stream (allocates the pool's layers and the kernels' workspaces
        # before capture, so neither lands inside the graph).
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.runner.forward(input_ids, positions, write_positions, slots=None, key_length=key_length)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._memory):
            output = self.runner.forward(
                input_ids, positions, write_positions, slots=None, key_length=key_length
            )
        logger.info("captured a decode graph for %d rows and %d keys", rows, key_length)
        return _Graph(graph, input_ids, positions, write_positions, output)
