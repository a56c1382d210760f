"""One ``SlotRunner`` kept over a model's ``generate_batched`` calls, where each would build its own.

Distillation writes its replies a chunk at a time (2,048 conversations on a GPU) and prompt
writing a round at a time, each a ``generate_batched`` call. A runner built per call allocates
its pool again and, on a GPU, captures its CUDA graphs again: some ten captures a chunk (key
buckets up to the pool's positions, and the tail's row buckets), each a device sync, an emptied
allocator cache and two eager warm-ups, about 0.4 s against a chunk's ~4 s at 50,000 reply
tokens/s (docs/engine.md). A cache hands the same runner, graphs and all, to every call that
fits it. Between calls the runner is detached: whatever runs the model in between (labelling a
chunk's contexts, the training pass) sees it as it was handed in.
"""

from __future__ import annotations

from types import TracebackType

from transformers import PreTrainedModel

from engine.replies import FeatureRecorder
from engine.runner import SlotRunner

# Pool positions are rounded up to a multiple of this, so that a chunk whose longest prompt is a
# little longer than the last chunk's still fits the runner built for that one.
CAPACITY_STEP = 64


def rounded_capacity(capacity: int) -> int:
    return -(-capacity // CAPACITY_STEP) * CAPACITY_STEP


class RunnerCache:
    """Hands out one attached ``SlotRunner`` of ``model`` at a time, reused while it fits.

    A runner fits a call that needs its rows, at most its positions, and features of the layout
    its graphs were captured with. Its steps then read only as many keys as the call's own
    runner would (``SlotRunner.limit_keys``), and the rows must be the call's: a run's replies
    do not depend on the runner it got (a shard of a fanned-out job distils a chunk as the
    whole run does). One that does not fit is closed before the next is built, so a cache never
    holds two pools. ``close`` (or leaving ``with``) frees the last one. (A run that distils
    self-instruct prompts keeps two caches, one for writing and one for answering: on a GPU at
    256 rows the writer's pool is about a third of the answerer's.)"""

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.built = 0  # runners built so far: what reuse saved is the calls less this
        self._runner: SlotRunner | None = None
        self._layout: tuple[object, ...] | None = None

    def take(self, *, rows: int, capacity: int, recorder: FeatureRecorder | None) -> SlotRunner:
        """An attached runner of ``rows`` rows (plus the shared prefix's slot) whose steps read
        up to ``capacity`` positions a slot, recording with ``recorder``. Give it back with
        ``give_back`` before anything else runs the model."""
        layout = None if recorder is None else recorder.layout
        runner = self._runner
        if (
            runner is None
            or runner.pool.slots != rows + 1
            or runner.pool.capacity < capacity
            or layout != self._layout
        ):
            self.close()
            runner = SlotRunner(
                self.model,
                slots=rows + 1,
                capacity=rounded_capacity(capacity),
                recorder=recorder,
                graph_rows=rows,
            )
            self._runner, self._layout = runner, layout
            self.built += 1
        runner.recorder = recorder
        runner.limit_keys(capacity)
        runner.attach()
        return runner

    def give_back(self, runner: SlotRunner) -> None:
        """Detach ``runner`` (the model is as handed in again), keeping it for the next call."""
        runner.detach()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
        self._runner, self._layout = None, None

    def __enter__(self) -> RunnerCache:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
