"""CUDA graphs of the target's short steps: one captured forward per (rows, width, keys)
bucket, replayed. A decode step is one token a row; a batch-1 verify step, the pending token
and K drafts.

A step of a small model is launch-bound on a GPU: hundreds of tiny kernels, each a few
microseconds of host time, around a fraction of a millisecond of work. A graph replays the
whole step with one launch. Shapes must not change between replays, so rows and keys are
rounded up to powers of two (a handful of graphs per run; the width is taken as it comes,
one per K); the padding rows write their keys to the pool's scratch position and are cut
from the outputs. Features the recorder takes are computed inside the graph, so they come
back as the graph's own output buffers.

Mixture-of-experts targets route tokens with data-dependent shapes, which a graph cannot hold:
they decode eagerly. So do targets with dynamic RoPE scaling: transformers compares each
forward's largest position with its cached length on the host to resize the frequencies, a
read back that a capture refuses (and frequencies a graph would keep).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

import torch

if TYPE_CHECKING:
    from torch.cuda import _POOL_HANDLE

    from engine.runner import SlotRunner, StepOutput

logger = logging.getLogger(__name__)

DISABLE = "EAGLENEST_CUDA_GRAPHS"  # set to 0 to decode eagerly on CUDA too
# The widest step captured, in tokens a row: decode, verify and a draft proposal's new entries.
# A wider one (a prompt joining) runs eagerly: every width is a graph of its own.
GRAPHED_WIDTH = 16


def graphs_enabled(device: torch.device) -> bool:
    """Whether steps on ``device`` may be captured: CUDA, and not turned off."""
    return device.type == "cuda" and os.environ.get(DISABLE, "1") != "0"


def graphs_wanted(device: torch.device, config: object) -> bool:
    """Whether decode steps on ``device`` should be captured (CUDA, a dense target whose RoPE
    does not resize itself, not disabled)."""
    text = getattr(config, "get_text_config", lambda: config)()
    experts = getattr(text, "num_local_experts", None) or getattr(text, "num_experts", None)
    return graphs_enabled(device) and not experts and not rope_resizes(getattr(text, "rope_parameters", None))


def rope_resizes(rope: object) -> bool:
    """Whether RoPE settings (a config's ``rope_parameters``: one dict, or one per layer type)
    are dynamic: transformers' ``dynamic_rope_update`` then reads the step's largest position
    back with ``bool()`` to resize the frequencies, which fails a CUDA graph's capture."""
    if not isinstance(rope, dict):
        return False
    settings = [value for value in rope.values() if isinstance(value, dict)] or [rope]
    return any("dynamic" in str(setting.get("rope_type", "")) for setting in settings)


def power_of_two_at_least(value: int, floor: int) -> int:
    size = floor
    while size < value:
        size *= 2
    return size


_Output = TypeVar("_Output")


class Capture(Protocol):
    """Captures a function of no arguments: (replay, its output), where ``replay()`` computes
    the function again into that same output. ``cuda_graph_capture`` on a GPU; the tests drive
    the bookkeeping around it on a CPU with an eager stand-in."""

    def __call__(self, function: Callable[[], _Output]) -> tuple[Callable[[], None], _Output]: ...


@dataclass
class CaptureTotals:
    """Every graph captured in this process so far, and the wall time the captures took, in
    all and by kind ("target": the target's steps; "draft": the head's proposals)."""

    captures: int = 0
    seconds: float = 0.0
    seconds_by_kind: dict[str, float] = field(default_factory=dict)

    def seconds_of(self, kind: str) -> float:
        return self.seconds_by_kind.get(kind, 0.0)

    def copy(self) -> CaptureTotals:
        return replace(self, seconds_by_kind=dict(self.seconds_by_kind))

    def since(self, earlier: CaptureTotals) -> CaptureTotals:
        """What was captured after ``earlier``, a copy of these totals taken before."""
        return CaptureTotals(
            captures=self.captures - earlier.captures,
            seconds=self.seconds - earlier.seconds,
            seconds_by_kind={
                kind: self.seconds_of(kind) - earlier.seconds_of(kind) for kind in self.seconds_by_kind
            },
        )


# A capture costs a device sync, an emptied cache and two eager warm-up runs: tens of steps'
# time, once per runner and shape. What measures steady-state steps leaves it out: the serving
# engine's cost model skips a step that captured, and benchmarks/engine_speed.py subtracts it.
CAPTURED = CaptureTotals()


@contextmanager
def captures_during() -> Iterator[Callable[[], CaptureTotals]]:
    """Inside the block, a function that says what has been captured since it began."""
    before = CAPTURED.copy()
    yield lambda: CAPTURED.since(before)


def counted(capture: Capture, kind: str) -> Capture:
    """``capture``, each call added to ``CAPTURED`` under ``kind`` (the graphs' own counters
    stay per runner)."""

    def counting(function: Callable[[], _Output]) -> tuple[Callable[[], None], _Output]:
        started = time.perf_counter()
        try:
            return capture(function)
        finally:
            seconds = time.perf_counter() - started
            CAPTURED.captures += 1
            CAPTURED.seconds += seconds
            CAPTURED.seconds_by_kind[kind] = CAPTURED.seconds_of(kind) + seconds

    return counting


def cuda_graph_capture(memory: _POOL_HANDLE) -> Capture:
    """Capture into a CUDA graph in the memory pool ``memory``, after a warm-up on a side
    stream (it allocates the kernels' workspaces, and a pool's layers, outside the graph)."""

    def capture(function: Callable[[], _Output]) -> tuple[Callable[[], None], _Output]:
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                function()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=memory):
            output = function()
        return graph.replay, output

    return capture


@dataclass
class _Graph:
    replay: Callable[[], None]
    input_ids: torch.Tensor  # [rows, width]
    positions: torch.Tensor  # [rows, width]
    write_positions: torch.Tensor  # [rows, width]
    slots: torch.Tensor | None  # [rows] each row's slot; None: row r is slot r
    output: StepOutput


class DecodeGraphs:
    """The step graphs of one runner, sharing one memory pool. Rows are the first slots, or
    any slots given per step (the serving target's sequences hold slots in any order)."""

    def __init__(self, runner: SlotRunner, max_rows: int, capture: Capture | None = None) -> None:
        self.runner, self.max_rows = runner, max_rows
        self._graphs: dict[tuple[int, int, int, bool], _Graph] = {}
        self._capture_function = counted(
            capture or cuda_graph_capture(torch.cuda.graph_pool_handle()), "target"
        )
        self.captures = 0

    def bucket(self, rows: int, width: int, key_length: int) -> tuple[int, int, int]:
        return (
            min(self.max_rows, power_of_two_at_least(rows, 8)),
            width,
            min(self.runner.key_limit, power_of_two_at_least(key_length, 64)),
        )

    def run(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        write_positions: torch.Tensor,
        key_length: int,
        slots: torch.Tensor | None = None,
    ) -> StepOutput:
        rows, width = input_ids.shape
        key = (*self.bucket(rows, width, key_length), slots is not None)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._capture(*key)
        graph.input_ids[:rows].copy_(input_ids)
        graph.positions[:rows].copy_(positions)
        graph.write_positions[:rows].copy_(write_positions)
        if graph.slots is not None and slots is not None:
            graph.slots[:rows].copy_(slots)
        # Padding rows must not write where an earlier, larger call's rows did.
        graph.write_positions[rows:].fill_(self.runner.pool.scratch)
        graph.replay()
        return graph.output.rows(rows)

    def _capture(self, rows: int, width: int, key_length: int, slotted: bool) -> _Graph:
        device, scratch = self.runner.pool.device, self.runner.pool.scratch
        # Padding rows (and the warm-up) write only to the scratch position: harmless to the pool.
        input_ids = torch.zeros((rows, width), dtype=torch.long, device=device)
        positions = torch.zeros((rows, width), dtype=torch.long, device=device)
        write_positions = torch.full((rows, width), scratch, dtype=torch.long, device=device)
        # Padding rows read slot 0 and write its scratch position: harmless to every sequence.
        slots = torch.zeros(rows, dtype=torch.long, device=device) if slotted else None

        def step() -> StepOutput:
            return self.runner.forward(
                input_ids, positions, write_positions, slots=slots, key_length=key_length
            )

        replay, output = self._capture_function(step)
        self.captures += 1
        logger.info("captured a step graph: %d rows of %d tokens, %d keys", rows, width, key_length)
        return _Graph(replay, input_ids, positions, write_positions, slots, output)
