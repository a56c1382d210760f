"""What a client asks the serving engine for, and what comes back while it runs."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from engine.sampling import SamplingParams

FinishReason = Literal["eos", "length", "cancelled", "error"]

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One completion: prompt token ids, how many tokens at most, how to pick them."""

    prompt_ids: list[int]
    max_new_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    seed: int | None = None
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("the prompt is empty: at least one prompt token is needed")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """Tokens accepted for a request in one engine step; ``finish_reason`` set on the last event."""

    token_ids: list[int]
    finish_reason: FinishReason | None = None
    error: str | None = None


@dataclass(slots=True)
class RequestStats:
    """Speculation of one request: drafts proposed and accepted at each verification."""

    proposed_per_step: list[int] = field(default_factory=list)
    accepted_per_step: list[int] = field(default_factory=list)

    @property
    def tau(self) -> float:
        steps = len(self.accepted_per_step)
        return (sum(self.accepted_per_step) + steps) / steps if steps else 0.0


EventSink = Callable[[TokenEvent], None]


class RequestHandle:
    """A submitted request. ``on_event`` (if any) is called from the engine thread with
    every event; ``wait`` blocks until the request finished and returns all its tokens."""

    def __init__(self, request: GenerationRequest, on_event: EventSink | None = None) -> None:
        self.id = next(_ids)
        self.request = request
        self.token_ids: list[int] = []
        self.finish_reason: FinishReason | None = None
        self.error: str | None = None
        self.stats = RequestStats()
        self.cancelled = threading.Event()
        self._on_event = on_event
        self._done = threading.Event()

    def cancel(self) -> None:
        """Ask the engine to drop this request at its next step (client gone, stop string seen)."""
        self.cancelled.set()

    def deliver(self, event: TokenEvent) -> None:
        """Called by the engine thread only."""
        self.token_ids.extend(event.token_ids)
        if event.finish_reason is not None:
            self.finish_reason = event.finish_reason
            self.error = event.error
        if self._on_event is not None:
            self._on_event(event)
        if event.finish_reason is not None:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> list[int]:
        if not self._done.wait(timeout):
            raise TimeoutError(f"request {self.id} did not finish within {timeout} s")
        if self.finish_reason == "error":
            raise RuntimeError(f"request {self.id} failed: {self.error}")
        return self.token_ids
