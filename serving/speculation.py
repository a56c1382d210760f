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

from collections import deque
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
    """Recent wall seconds of a step for each K run at one batch size, and a line through them.

    Each K keeps its last ``window`` step times and is priced at their lower quartile. A step's
    wall time is its cost plus whatever else the machine did meanwhile (another process on the
    cores, a shape run for the first time, a garbage collection), and that only ever adds: the
    EWMA this replaced let one 814 ms step, the first at a new batch size, price its K at five
    times its cost for the rest of a benchmark level. A K not run for ``stale_after`` timed
    steps leaves the fit (the two K run last always stay): steps get dearer as sequences grow.
    """

    window: int = 8
    stale_after: int = 64
    samples: dict[int, deque[float]] = field(default_factory=dict)
    timed: dict[int, int] = field(default_factory=dict)  # steps timed per K, window or not
    last_seen: dict[int, int] = field(default_factory=dict)
    steps: int = 0

    def observe(self, k: int, seconds: float) -> None:
        self.samples.setdefault(k, deque(maxlen=self.window)).append(seconds)
        self.timed[k] = self.timed.get(k, 0) + 1
        self.steps += 1
        self.last_seen[k] = self.steps
        recent = sorted(self.last_seen, key=self.last_seen.__getitem__)[-2:]
        for old in [k for k, seen in self.last_seen.items() if self.steps - seen >= self.stale_after]:
            if old not in recent:
                del self.samples[old], self.timed[old], self.last_seen[old]

    @property
    def has_line(self) -> bool:
        """Timed at two K or more: its own line, not only the prior's slope through one K."""
        return len(self.samples) >= 2

    def measured(self) -> dict[int, float]:
        """Each measured K's step seconds: the lower quartile of its recent times."""
        return {k: sorted(times)[(len(times) - 1) // 4] for k, times in self.samples.items()}

    def line(self, prior_share: float, prior_weight: float) -> tuple[float, float] | None:
        """(intercept a, slope b) of step seconds against K: least squares over the measured K,
        each weighted by how often it was timed, plus ``prior_weight * (b - prior_share * a)**2``,
        a pull towards drafts costing ``prior_share`` of a plain step each. The pull weighs as much
        as timed steps whose K spread sum(n_k (k - mean k)**2) is ``prior_weight``: a K timed once
        or twice beside its neighbour (what a probe measures) cannot make drafts free from noise
        alone, while K timed often and far apart outweigh it. One measured K gets the prior's
        slope exactly. None before any step of this batch size."""
        points = self.measured()
        if not points:
            return None
        # Each K weighs as many times as it was timed: a K timed once is a guess, and a batch
        # size served for long outweighs the prior however close together its K are.
        weights = self.timed
        n, sum_k = sum(weights.values()), sum(w * k for k, w in weights.items())
        sum_s = sum(weights[k] * s for k, s in points.items())
        sum_kk = sum(w * k * k for k, w in weights.items())
        sum_ks = sum(weights[k] * k * s for k, s in points.items())
        p, weight = prior_share, prior_weight
        # The normal equations of the penalised least squares, solved for (a, b).
        m11, m12, m22 = n + weight * p * p, sum_k - weight * p, sum_kk + weight
        determinant = m11 * m22 - m12 * m12
        intercept = (sum_s * m22 - m12 * sum_ks) / determinant
        slope = (m11 * sum_ks - m12 * sum_s) / determinant
        if intercept <= 0.0:  # an inconsistent fit: price from the cheapest K with the prior
            k, seconds = min(points.items(), key=lambda item: item[1])
            intercept = seconds / (1.0 + p * k)
            slope = p * intercept
        # Drafting more never makes a step cheaper; a negative slope is timing noise.
        return intercept, max(slope, 0.0)

    def estimate(self, k: int, prior_share: float, prior_weight: float) -> float | None:
        """The line's seconds at K (None before any step of this batch size). Measured K are
        read off the line too: two K whose drafts gain nothing must not be told apart by noise
        (a head that is never right would otherwise draft whenever a K = 1 step ran fast)."""
        line = self.line(prior_share, prior_weight)
        return None if line is None else seconds_on(line, k)


def seconds_on(line: tuple[float, float], k: int) -> float:
    """A step's seconds at K on an (intercept, slope) line, never zero."""
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
    then one fewer), so the choice can move as acceptance and costs change. Each batch size's
    line is pulled towards the draft share of the nearest other batch size timed at two K
    (``draft_share``; before any, ``prior_slope`` of a plain step), as hard as ``prior_weight``
    says (``StepCosts.line``).
    """

    max_tokens: int = 6
    decay: float = 0.05  # EWMA weight of each new acceptance observation
    prior: float = 0.7  # optimistic start: deep chains get tried before being judged
    cost_window: int = 8  # recent step times kept per batch size and K
    prior_slope: float = 0.15  # a draft's cost as a share of a plain step, before measuring
    # How hard a batch size's own step times are pulled to the borrowed draft share
    # (StepCosts.line). Chosen on simulated levels of 30 steps at a new batch size, with step
    # times like this CPU's (5-10 % noise, a few steps 3-10x slow): 0.5 let outliers through,
    # 4 held a GPU-like batch at the borrowed, too-cautious share (benchmarks/adaptive_k_sim.py).
    prior_weight: float = 2.0
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
        if self.cost_window < 1:
            raise ValueError(f"cost_window must be >= 1, got {self.cost_window}")
        if self.prior_weight <= 0.0:
            raise ValueError(f"prior_weight must be > 0, got {self.prior_weight}")
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
        share, weight = self._prior(bucket, self._fitted_shares())
        # One fit for every K (a fit sorts each K's recent times); before any step, relative.
        line = costs.line(share, weight) if costs is not None else None
        line = line if line is not None else (1.0, share)
        scores = [(self.expected_tokens(k) / seconds_on(line, k), -k) for k in range(self.max_tokens + 1)]
        # On a tie the smaller K: the same tokens for fewer head forwards.
        return -max(scores)[1]

    def draft_share(self, bucket: int) -> float:
        """What one more draft adds to a step at this batch size, as a share of a plain step:
        its own line's once it was timed at two K, else its prior (``_prior``)."""
        shares = self._fitted_shares()
        return shares[bucket] if bucket in shares else self._prior(bucket, shares)[0]

    def _fitted_shares(self) -> dict[int, float]:
        """The draft share of every batch size timed at two K, from the smallest up: each line
        is pulled towards the prior its smaller neighbours give it (``_prior``)."""
        shares: dict[int, float] = {}
        for bucket in sorted(self._costs):
            costs = self._costs[bucket]
            if not costs.has_line:
                continue
            line = costs.line(*self._prior(bucket, shares))
            if line is not None:
                intercept, slope = line
                shares[bucket] = slope / intercept
        return shares

    def _prior(self, bucket: int, shares: dict[int, float]) -> tuple[float, float]:
        """(draft share, weight) a batch size's line is pulled towards: the nearest other
        fitted batch size's share, scaled by the ratio of the batch sizes (each draft is one
        more verified row per sequence, so where rows cost, its share grows with the batch),
        at ``prior_weight``. Scaling up errs towards fewer drafts at a new, larger batch (a
        weight-bound GPU soon measures its way back up); borrowing the share unscaled sent a
        4-sequence batch straight to batch 1's deep K. Before any batch size is fitted,
        ``prior_slope`` -- a guess, not a measurement of this machine -- at a quarter of it."""
        others = [known for known in shares if known != bucket]
        if not others:
            return self.prior_slope, self.prior_weight / 4
        known = min(others, key=lambda size: (abs(size - bucket), size))
        return shares[known] * bucket / known, self.prior_weight

    def num_tokens(self, batch_size: int) -> int:
        bucket = batch_bucket(batch_size)
        best = self.best(batch_size)
        steps = self._steps.get(bucket, 0) + 1
        self._steps[bucket] = steps
        if steps % self._probe_interval(bucket):
            return best
        probes = self._probes.get(bucket, 0)
        self._probes[bucket] = probes + 1
        costs = self._costs.get(bucket)
        if best >= 2 and (costs is None or not costs.has_line):
            # A batch size's first probe is a plain step: K far apart price a draft in one
            # probe, where a neighbour's differs from the borrowed K's by less than the noise
            # (on the CPU, batch 1's share scaled up priced a draft at batch 4 at a ninth of
            # its cost, and neighbours of K = 6 took most of a level to correct it).
            return 0
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
        if costs is not None and costs.has_line:
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
        if bucket not in self._costs:
            # The first step at a batch size pays for one-time work (814 ms against 140 for the
            # next on the CPU: new shapes, buffers growing); it is not timed.
            self._costs[bucket] = StepCosts(window=self.cost_window)
            return
        self._costs[bucket].observe(num_tokens, seconds)
