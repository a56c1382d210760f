"""Learning-rate schedule and, under a time budget, how many steps fit.

With a time budget the cosine schedule must end when the time does, but the number of
steps depends on the machine: the planner times the first steps (separately the target's
feature pass, which cached batches skip, and the head's update) and re-plans as it goes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field


def learning_rate(step: int, *, total_steps: int, peak: float, warmup_steps: int, min_ratio: float) -> float:
    """Linear warm-up to ``peak``, then cosine decay to ``peak * min_ratio`` at ``total_steps``."""
    warmup = min(warmup_steps, max(total_steps // 10, 1))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def _median(values: Iterable[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[len(ordered) // 2]


@dataclass
class StepTimer:
    """Recent seconds per padded token of the head update and of the target's feature pass."""

    window: int = 30
    head: deque[float] = field(default_factory=deque)
    features: deque[float] = field(default_factory=deque)
    eval_seconds: float = 0.0  # the latest evaluation pass

    def _push(self, values: deque[float], seconds: float, tokens: int) -> None:
        values.append(seconds / max(tokens, 1))
        while len(values) > self.window:
            values.popleft()

    def record_head(self, seconds: float, tokens: int) -> None:
        self._push(self.head, seconds, tokens)

    def record_features(self, seconds: float, tokens: int) -> None:
        self._push(self.features, seconds, tokens)

    @property
    def ready(self) -> bool:
        return bool(self.head)


def _step_costs(
    upcoming_tokens: Iterable[tuple[int, bool]], timer: StepTimer, evals_per_step: float
) -> Iterable[float]:
    head = _median(timer.head) or 0.0
    features = _median(timer.features) or 0.0
    eval_cost = evals_per_step * timer.eval_seconds
    for tokens, cached in upcoming_tokens:
        yield tokens * (head if cached else head + features) + eval_cost


def estimate_seconds(
    upcoming_tokens: Iterable[tuple[int, bool]], *, steps: int, timer: StepTimer, evals_per_step: float = 0.0
) -> float | None:
    """Expected seconds for the next ``steps`` batches; None until a step has been timed."""
    if not timer.ready:
        return None
    total = 0.0
    for count, cost in enumerate(_step_costs(upcoming_tokens, timer, evals_per_step)):
        if count >= steps:
            break
        total += cost
    return total


def steps_that_fit(
    upcoming_tokens: Iterable[tuple[int, bool]],
    *,
    seconds: float,
    timer: StepTimer,
    evals_per_step: float = 0.0,
) -> int | None:
    """How many of the upcoming batches fit in ``seconds``.

    ``upcoming_tokens`` yields (padded tokens, features already cached) per upcoming
    batch in training order; None until the first step has been timed.
    """
    if not timer.ready:
        return None
    used = 0.0
    fitted = 0
    for cost in _step_costs(upcoming_tokens, timer, evals_per_step):
        used += cost
        if used > seconds:
            break
        fitted += 1
    return fitted
