"""Learning-rate schedule and the time-budget planner."""

from __future__ import annotations

import math

import pytest

from trainer.eagle.schedule import StepTimer, estimate_seconds, learning_rate, steps_that_fit


def test_warmup_then_cosine_to_the_floor() -> None:
    def lr(step: int) -> float:
        return learning_rate(step, total_steps=100, peak=1e-3, warmup_steps=10, min_ratio=0.1)

    assert lr(0) == pytest.approx(1e-4)
    assert lr(9) == pytest.approx(1e-3)
    assert lr(10) == pytest.approx(1e-3)
    assert lr(55) == pytest.approx(1e-4 + 0.9e-3 * 0.5)
    assert lr(100) == pytest.approx(1e-4)
    assert lr(500) == pytest.approx(1e-4)
    assert all(lr(s) >= lr(s + 1) for s in range(10, 100))


def test_warmup_is_at_most_a_tenth_of_a_short_run() -> None:
    assert learning_rate(0, total_steps=20, peak=1.0, warmup_steps=50, min_ratio=0.0) == pytest.approx(0.5)
    assert learning_rate(2, total_steps=20, peak=1.0, warmup_steps=50, min_ratio=0.0) == pytest.approx(1.0)
    end = learning_rate(20, total_steps=20, peak=1.0, warmup_steps=50, min_ratio=0.0)
    assert math.isclose(end, 0.0, abs_tol=1e-12)


def test_planner_counts_the_feature_pass_only_for_uncached_batches() -> None:
    timer = StepTimer()
    assert steps_that_fit([(100, False)], seconds=10, timer=timer) is None
    timer.record_head(1.0, 100)  # 0.01 s per token
    timer.record_features(2.0, 100)  # 0.02 s per token
    # Uncached batches cost 3 s, cached ones 1 s.
    upcoming = [(100, False), (100, False), (100, True), (100, True), (100, True)]
    assert steps_that_fit(iter(upcoming), seconds=7.5, timer=timer) == 3
    assert steps_that_fit(iter(upcoming), seconds=100, timer=timer) == 5
    assert estimate_seconds(iter(upcoming), steps=4, timer=timer) == pytest.approx(8.0)
    timer.eval_seconds = 5.0
    assert estimate_seconds(iter(upcoming), steps=2, timer=timer, evals_per_step=0.1) == pytest.approx(7.0)
