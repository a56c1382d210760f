"""Where a speculative round's time goes: drafting or verification.

On a CPU the host runs the work, so the host clock splits a round. On a GPU the host only
queues kernels: a draft that reads nothing back returns as soon as its kernels are queued, and
they run while the host waits for the verification's result, so the host clock would book the
head's time as the target's (``draft_share``, ``verify_cost_ratio`` and ``limits()`` in
``trainer eval`` would all read wrong). There the boundaries are CUDA events in the stream,
read when the generation is over: every round ends by reading its accepted tokens back, so
its events have completed by then (but the last round's closing mark, recorded after that read,
which ``totals`` waits for on a stream with nothing else to do); no round gains a sync.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import torch


class StreamEvent(Protocol):
    """What the clock needs of ``torch.cuda.Event``."""

    def record(self) -> None: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end_event: StreamEvent) -> float: ...  # milliseconds


def _cuda_event() -> StreamEvent:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call, return-value]


# A boundary: the host clock's reading (CPU) or an event in the stream (CUDA).
Mark = float | StreamEvent


class PhaseClock:
    """Marks each round's three boundaries (drafting starts, verification starts, the round
    ends) and sums the two phases over a generation (``totals``), in seconds.

    ``new_event`` makes the stream's markers on CUDA; a test passes a stand-in."""

    def __init__(self, device: torch.device, new_event: Callable[[], StreamEvent] = _cuda_event) -> None:
        self._new_event = new_event if device.type == "cuda" else None
        self._marks: list[Mark] = []  # three a round: drafting, verification, the round's end

    def mark(self) -> None:
        """The next boundary of the current round: call it three times a round."""
        self._marks.append(self._now())

    def totals(self) -> tuple[float, float]:
        """Seconds spent drafting and verifying over every finished round. On CUDA, call it once
        the generation has read its last tokens back (its events have completed then)."""
        if len(self._marks) % 3:
            raise RuntimeError("a round was marked only partly: every round takes three marks")
        if self._marks and not isinstance(last := self._marks[-1], float):
            last.synchronize()
        started, verifying, finished = self._marks[0::3], self._marks[1::3], self._marks[2::3]
        draft = sum(_seconds_between(a, b) for a, b in zip(started, verifying, strict=True))
        verify = sum(_seconds_between(a, b) for a, b in zip(verifying, finished, strict=True))
        return draft, verify

    def _now(self) -> Mark:
        if self._new_event is None:
            return time.perf_counter()
        event = self._new_event()
        event.record()
        return event


def _seconds_between(start: Mark, end: Mark) -> float:
    # One clock per generation (its device is fixed): both marks are of one kind.
    if isinstance(start, float):
        assert isinstance(end, float)
        return end - start
    assert not isinstance(end, float)
    return start.elapsed_time(end) / 1000
