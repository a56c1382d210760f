"""How many tokens to draft per step: fixed, or chosen from measured acceptance and measured cost.

A step with K drafts per sequence emits, per sequence, 1 + a_1 + ... + a_K tokens on average
(a_j: the chance that drafts 1..j are all accepted) and costs K head forwards plus one target
forward over K + 1 tokens per sequence. Which K is fastest depends on the hardware and the
batch: at batch 1 on a GPU the target's forward streams its weights and extra rows are nearly
free; on a CPU, or at a larger batch, every verified row costs. A fixed threshold on acceptance
cannot know which machine it runs on (the thresholds this policy used before picked K = 1-2 at
batch 1 and plain decoding at batch 8 on a 2-core CPU where K = 3 beat both), so
``AdaptiveSpeculation`` measures: acceptance by position, pooled over every step (it does not
depend on the batch), and the wall time of a step for each batch size and K it has run. It picks
the K with the most tokens per second, reading the cost of every K off a line fitted to the
step times of the ones it has run, and now and then runs a neighbouring K so that both stay measured. A head
that is rarely right makes every K > 0 a loss, so the policy decodes plainly and only the
probes (K = 1) keep measuring it: serving is never slower than plain decoding for long.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class SpeculationPolicy(Protocol):
    max_tokens: int

    def num_tokens(self, batch_size: int) -> int:
        """Draft tokens per sequence for a step of ``batch_size`` sequences."""
        ...

    def observe(self, proposed: int, accepted: int) -> None:
        """One verification's outcome."""
        ...

    def observe_step(self, batch_size: int, num_tokens: int, seconds: float) -> None:
        """The wall time of a decoding step of ``batch_size`` sequences with ``num_tokens`` drafts."""
        ...


@dataclass(slots=True)
class FixedSpeculation:
    """Always K drafts (0 = plain decoding)."""

    max_tokens: int

    def __post_init__(self) -> None:
        if self.max_tokens < 0:
            raise ValueError(f"num_speculative_tokens must be >= 0, got {self.max_tokens}")

    def num_tokens(self, batch_size: int) -> int:
        return self.max_tokens

    def observe(self, proposed: int, accepted: int) -> None:
        return None

    def observe_step(self, batch_size: int, num_tokens: int, seconds: float) -> None:
        return None


def batch_bucket(batch_size: int) -> int:
    """Step costs are kept per batch size up to 16, then per power of two (a batch of 40 is
    timed with the batches of 33-64)."""
    if batch_size <= 16:
        return max(batch_size, 1)
    return 1 << (batch_size - 1).bit_length()


@dataclass(slots=True)
class StepCosts:
    """EWMA wall seconds of a step for each K run at one batch size, and a line through them.

    A K not run for ``stale_after`` timed steps leaves the fit (the two K run last always stay):
    steps get dearer as sequences grow, and an engine's first steps are slow, so an old time
    of a K the policy has moved away from would tilt the line.
    """

    stale_after: int = 64
    seconds: dict[int, float] = field(default_factory=dict)
    last_seen: dict[int, int] = field(default_factory=dict)
    steps: int = 0

    def observe(self, k: int, seconds: float, weight: float) -> None:
        known = self.seconds.get(k)
        self.seconds[k] = seconds if known is None else known + weight * (seconds - known)
        self.steps += 1
        self.last_seen[k] = self.steps
        recent = sorted(self.last_seen, key=self.last_seen.__getitem__)[-2:]
        for old in [k for k, seen in self.last_seen.items() if self.steps - seen >= self.stale_after]:
            if old not in recent:
                del self.seconds[old], self.last_seen[old]

    def fitted(self) -> tuple[float, float] | None:
        """The line when two or more K were measured (no prior in it)."""
        return self.line(0.0) if len(self.seconds) >= 2 else None

    def line(self, prior_slope: float) -> tuple[float, float] | None:
        """(intercept, slope) of step seconds against K, least squares over the measured K;
        one measured K borrows ``prior_slope`` (seconds per draft as a share of a plain step)."""
        if not self.seconds:
            return None
        ks = list(self.seconds)
        if len(ks) == 1:
            k, seconds = ks[0], self.seconds[ks[0]]
            intercept = seconds / (1.0 + prior_slope * k)
            return intercept, prior_slope * intercept
        mean_k = sum(ks) / len(ks)
        mean_s = sum(self.seconds.values()) / len(ks)
        spread = sum((k - mean_k) ** 2 for k in ks)
        slope = sum((k - mean_k) * (self.seconds[k] - mean_s) for k in ks) / spread
        # Drafting more never makes a step cheaper; a negative slope is timing noise.
        slope = max(slope, 0.0)
        return mean_s - slope * mean_k, slope

    def estimate(self, k: int, prior_slope: float) -> float | None:
        """The line's seconds at K (None before any step of this batch size). Measured K are
        read off the line too: two K whose drafts gain nothing must not be told apart by noise
        (a head that is never right would otherwise draft whenever a K = 1 step ran fast)."""
        line = self.line(prior_slope)
        if line is None:
            return None
        intercept, slope = line
        return max(intercept + slope * k, 1e-9)


@dataclass(slots=True)
class AdaptiveSpeculation:
    """K for the most tokens per second, from measured acceptance and measured step costs.

    ``rates[j]`` is an EWMA of P(draft j accepted | drafts 0..j-1 accepted); a sequence's
    expected tokens with K drafts is 1 plus the running products of the first K rates. Step
    costs (``observe_step``) are kept per batch size (``batch_bucket``) and K. The policy runs
    the K with the best expected tokens per second of step at this batch size; every
    ``probe_every`` steps of a batch size it runs a neighbour of that K instead (one more,
    then one fewer), so the choice can move as acceptance and costs change. A batch size not
    yet timed at two K prices a draft from the nearest one that was (``draft_share``); before
    any, a draft costs ``prior_slope`` of a plain step.
    """

    max_tokens: int = 6
    decay: float = 0.05  # EWMA weight of each new acceptance observation
    prior: float = 0.7  # optimistic start: deep chains get tried before being judged
    cost_decay: float = 0.2  # EWMA weight of each timed step
    prior_slope: float = 0.15  # a draft's cost as a share of a plain step, before measuring
    # 1 step in 16 runs a neighbouring K: when it is the worse one, that costs about 1/16 of
    # the difference between the two.
    probe_every: int = 16
    rates: list[float] = field(default_factory=list)
    _costs: dict[int, StepCosts] = field(default_factory=dict, init=False, repr=False)
    _steps: dict[int, int] = field(default_factory=dict, init=False, repr=False)
    _probes: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"adaptive speculation needs max_tokens >= 1, got {self.max_tokens}")
        if self.probe_every < 2:
            raise ValueError(f"probe_every must be >= 2, got {self.probe_every}")
        if not 0.0 < self.cost_decay <= 1.0:
            raise ValueError(f"cost_decay must be in (0, 1], got {self.cost_decay}")
        if self.prior_slope < 0.0:
            raise ValueError(f"prior_slope must be >= 0, got {self.prior_slope}")
        if not self.rates:
            self.rates = [self.prior] * self.max_tokens
        if len(self.rates) != self.max_tokens:
            raise ValueError(f"rates has {len(self.rates)} entries for max_tokens {self.max_tokens}")

    def expected_acceptance(self) -> Sequence[float]:
        """P(drafts 1..j all accepted) for j = 1..max_tokens."""
        result: list[float] = []
        expected = 1.0
        for rate in self.rates:
            expected *= rate
            result.append(expected)
        return result

    def expected_tokens(self, k: int) -> float:
        """Tokens a sequence emits on average in a step with ``k`` drafts."""
        return 1.0 + sum(self.expected_acceptance()[:k])

    def best(self, batch_size: int) -> int:
        """The K with the most expected tokens per second of step at this batch size."""
        bucket = batch_bucket(batch_size)
        costs = self._costs.get(bucket)
        slope = self.draft_share(bucket)
        scores = []
        for k in range(self.max_tokens + 1):
            seconds = costs.estimate(k, slope) if costs is not None else None
            relative = seconds if seconds is not None else 1.0 + slope * k
            scores.append((self.expected_tokens(k) / relative, -k))
        # On a tie the smaller K: the same tokens for fewer head forwards.
        return -max(scores)[1]

    def draft_share(self, bucket: int) -> float:
        """What one more draft adds to a step, as a share of a plain step, at a batch size whose
        own line is not fitted yet: the nearest fitted batch size's share, scaled by the ratio
        of the batch sizes (each draft is one more verified row per sequence, so where rows
        cost, its share grows with the batch), else ``prior_slope``. Scaling up errs towards
        fewer drafts at a new, larger batch (a weight-bound GPU soon measures its way back up);
        borrowing the share unscaled sent a 4-sequence batch straight to batch 1's deep K."""
        fitted = {known: line for known, costs in self._costs.items() if (line := costs.fitted())}
        if not fitted:
            return self.prior_slope
        known = min(fitted, key=lambda size: (abs(size - bucket), size))
        intercept, slope = fitted[known]
        return slope / max(intercept, 1e-9) * bucket / known

    def num_tokens(self, batch_size: int) -> int:
        bucket = batch_bucket(batch_size)
        best = self.best(batch_size)
        steps = self._steps.get(bucket, 0) + 1
        self._steps[bucket] = steps
        if steps % self._probe_interval(bucket):
            return best
        probes = self._probes.get(bucket, 0)
        self._probes[bucket] = probes + 1
        # Alternate one more and one fewer; at an end of the range, the only neighbour.
        up, down = min(best + 1, self.max_tokens), max(best - 1, 0)
        if up == best:
            return down
        if down == best:
            return up
        return up if probes % 2 == 0 else down

    def _probe_interval(self, bucket: int) -> int:
        """``probe_every``, but 4x as often while this batch size has no line of its own (fewer
        than two K timed): until then its K is borrowed, and a short burst of requests at a new
        batch size would otherwise run the borrowed K for most of its steps."""
        costs = self._costs.get(bucket)
        if costs is not None and costs.fitted() is not None:
            return self.probe_every
        return max(self.probe_every // 4, 2)

    def observe(self, proposed: int, accepted: int) -> None:
        # Positions 0..accepted were judged (accepted ones and the first rejection); later
        # ones never reached the target's judgement and tell nothing.
        judged = min(accepted + 1, proposed)
        for position in range(judged):
            outcome = 1.0 if position < accepted else 0.0
            self.rates[position] += self.decay * (outcome - self.rates[position])

    def observe_step(self, batch_size: int, num_tokens: int, seconds: float) -> None:
        if seconds <= 0.0 or not 0 <= num_tokens <= self.max_tokens:
            return
        bucket = batch_bucket(batch_size)
        self._costs.setdefault(bucket, StepCosts()).observe(num_tokens, seconds, self.cost_decay)
