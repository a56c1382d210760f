"""How a speculative round's time is split between drafting and verification: the host clock on
a CPU, the stream's events on CUDA (where the host only queues the head's kernels and the host
clock would book them to the verification that waits for them)."""

from __future__ import annotations

import pytest
import torch

import speculative.decoder
from speculative import phase_clock
from speculative.decoder import SpeculativeDecoder
from speculative.phase_clock import PhaseClock
from tests.speculative.engine_doubles import random_head, tiny_target


class DeviceTimeline:
    """Stand-in CUDA events stamped from a scripted device timeline (milliseconds), one stamp per
    recorded event in order; counts which events were waited for."""

    def __init__(self, stamps_ms: list[float]) -> None:
        self.stamps_ms = list(stamps_ms)
        self.recorded: list[DeviceTimeline.Event] = []
        self.synchronized: list[DeviceTimeline.Event] = []

    class Event:
        def __init__(self, timeline: DeviceTimeline) -> None:
            self.timeline = timeline
            self.at_ms: float | None = None

        def record(self) -> None:
            self.at_ms = self.timeline.stamps_ms.pop(0)
            self.timeline.recorded.append(self)

        def synchronize(self) -> None:
            self.timeline.synchronized.append(self)

        def elapsed_time(self, end_event: DeviceTimeline.Event) -> float:
            assert self.at_ms is not None
            assert end_event.at_ms is not None
            return end_event.at_ms - self.at_ms

    def new_event(self) -> DeviceTimeline.Event:
        return DeviceTimeline.Event(self)


def test_on_a_cpu_the_host_clock_splits_each_round(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([10.0, 10.5, 12.0, 20.0, 20.25, 21.0])
    monkeypatch.setattr(phase_clock.time, "perf_counter", lambda: next(readings))
    clock = PhaseClock(torch.device("cpu"))
    for _ in range(6):
        clock.mark()
    assert clock.totals() == (0.75, 2.25)


def test_on_cuda_the_streams_events_split_each_round_not_the_host_clock() -> None:
    # Two rounds. The host queued each draft in ~no time; on the device the first draft ran
    # 30 ms and its verification 10 ms, the second 20 ms and 5 ms.
    timeline = DeviceTimeline([0.0, 30.0, 40.0, 100.0, 120.0, 125.0])
    clock = PhaseClock(torch.device("cuda"), new_event=timeline.new_event)  # type: ignore[arg-type]
    for _ in range(6):
        clock.mark()
    draft, verify = clock.totals()
    assert draft == pytest.approx(0.050)
    assert verify == pytest.approx(0.015)
    # The last round's closing mark is recorded after its tokens were read back: it is waited for.
    assert timeline.synchronized == [timeline.recorded[-1]]


def test_a_round_marked_only_partly_is_refused() -> None:
    clock = PhaseClock(torch.device("cpu"))
    clock.mark()
    with pytest.raises(RuntimeError, match="three marks"):
        clock.totals()


def test_the_decoder_books_its_rounds_through_the_phase_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A speculative generation's draft and verification seconds are the clock's: on CUDA the
    events' device times, whatever the host saw (driven here on a CPU with stand-in events)."""
    target = tiny_target("LlamaForCausalLM")
    decoder = SpeculativeDecoder(
        target, random_head(target, seed=1), num_speculative_tokens=2, pack_weights=False
    )
    timeline = DeviceTimeline([100.0 * step for step in range(3 * 40)])  # each phase: 100 ms on the device
    monkeypatch.setattr(
        speculative.decoder,
        "PhaseClock",
        lambda device: PhaseClock(torch.device("cuda"), new_event=timeline.new_event),  # type: ignore[arg-type]
    )
    result = decoder.generate([5, 6, 7, 8], max_new_tokens=9)
    rounds = result.num_verify_steps
    assert rounds >= 1
    assert len(timeline.recorded) == 3 * rounds
    assert result.draft_seconds == pytest.approx(0.1 * rounds)
    # The verification seconds are the events' too, besides a last plain step (host-clocked).
    last_step = result.num_target_forwards - 1 - rounds
    assert result.target_seconds >= 0.1 * rounds
    if last_step == 0:
        assert result.target_seconds == pytest.approx(0.1 * rounds)
