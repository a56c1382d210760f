"""Adaptive K: the K with the most tokens per second, from measured acceptance and step costs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from transformers import PreTrainedModel

from engine.cuda_graphs import CaptureTotals
from engine.heads.model import Eagle3DraftModel
from serving import AdaptiveSpeculation, GenerationRequest, ServingEngine
from serving import engine as serving_engine
from serving.speculation import SpeculationPolicy, StepCosts, batch_bucket
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9]


def run_steps(
    policy: AdaptiveSpeculation, batch_size: int, steps: int, cost: Callable[[int, int], float]
) -> list[int]:
    """Drive the policy as the engine does, with step seconds from ``cost(batch_size, K)``
    (acceptance stays what ``rates`` says: nothing is verified here)."""
    ks = []
    for _ in range(steps):
        k = policy.num_tokens(batch_size)
        policy.observe_step(batch_size, k, cost(batch_size, k))
        ks.append(k)
    return ks


def cpu_like(batch_size: int, k: int) -> float:
    """A target whose verified rows cost more as the batch grows, and a cheap head."""
    return 1.0 + 0.02 * k + 0.04 * batch_size * k


RATES = [0.55, 0.55, 0.6, 0.6]  # the shipped head's acceptance by position, roughly


def tokens_per_second(rates: list[float], batch_size: int, cost: Callable[[int, int], float]) -> list[float]:
    """Expected tokens per second of step at each K, by hand."""
    expected, tokens = 1.0, [1.0]
    for rate in rates:
        expected *= rate
        tokens.append(tokens[-1] + expected)
    return [tokens[k] / cost(batch_size, k) for k in range(len(tokens))]


def best_by_hand(rates: list[float], batch_size: int, cost: Callable[[int, int], float]) -> int:
    speeds = tokens_per_second(rates, batch_size, cost)
    return max(range(len(speeds)), key=speeds.__getitem__)


def test_policy_settles_on_the_k_with_the_most_tokens_per_second_at_each_batch_size() -> None:
    policy = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    for batch_size in (1, 4, 8):
        ks = run_steps(policy, batch_size, 64, cpu_like)
        settled = policy.best(batch_size)
        speeds = tokens_per_second(RATES, batch_size, cpu_like)
        # At batch 1, K = 3 and 4 are 0.2 % apart: the prior's pull may pick either. At 4 and
        # 8 the best K is ahead by 3 % or more and must be the one.
        assert speeds[settled] >= 0.99 * max(speeds)
        # Every step but the probes (one in probe_every) ran it, once the costs were measured.
        assert ks[-32:].count(settled) >= 30
    assert policy.best(1) > policy.best(8)  # drafts cost more in a bigger batch


def test_the_same_head_drafts_deeper_where_verification_is_cheap() -> None:
    """What a threshold cannot know: the best K depends on the machine, measured."""

    def gpu_like(batch_size: int, k: int) -> float:
        return 1.0 + 0.03 * k  # weight-bound: extra verified rows are nearly free

    on_gpu = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    on_cpu = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    run_steps(on_gpu, 8, 64, gpu_like)
    run_steps(on_cpu, 8, 64, cpu_like)
    assert on_gpu.best(8) == 4
    assert on_cpu.best(8) == best_by_hand(RATES, 8, cpu_like) < 4


def test_a_batch_size_never_timed_borrows_the_nearest_costs() -> None:
    policy = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    run_steps(policy, 8, 64, cpu_like)
    assert policy.best(7) == policy.best(8)
    assert batch_bucket(40) == batch_bucket(64) == 64 != batch_bucket(16) == 16


def test_a_larger_batch_prices_a_draft_up_from_a_smaller_ones_line() -> None:
    """Deep at batch 1 must not mean deep at the first steps of batch 4, where rows cost."""
    policy = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    run_steps(policy, 1, 64, cpu_like)
    share_at_1 = policy.draft_share(1)
    # cpu_like at batch 1: 0.02 + 0.04 per draft, pulled a little towards prior_slope's 0.15
    assert 0.06 < share_at_1 < 0.08
    assert policy.draft_share(4) == pytest.approx(4 * share_at_1)
    assert policy.best(1) >= 3
    assert best_by_hand(RATES, 1, cpu_like) == 4
    assert policy.best(4) <= best_by_hand(RATES, 4, cpu_like) < 4


def test_a_new_batch_size_probes_early_and_runs_near_its_best_k_within_a_few_steps() -> None:
    """A short burst at a new batch size must not spend most of its steps on a poor K."""
    policy = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    run_steps(policy, 1, 64, cpu_like)
    ks = run_steps(policy, 4, 12, cpu_like)
    # Step 4 probes a neighbour of the borrowed K (probe_every // 4); the first step at batch 4
    # is not timed (one-time work), so batch 4 has a line of its own from step 4 on.
    assert ks[3] != ks[2]
    speeds = tokens_per_second(RATES, 4, cpu_like)
    # Its line is still pulled towards batch 1's share scaled up (cautious: cpu_like's rows cost
    # less than that says), so it may run one draft fewer than the best: within 4 %.
    assert all(speeds[k] >= 0.96 * max(speeds) for k in ks[4:])


def test_a_new_batch_sizes_first_probe_is_a_plain_step_that_prices_its_drafts() -> None:
    """Batch 1 on a weight-bound machine makes drafts look free; at batch 4 on a CPU each costs
    a third of a plain step. Probing a neighbour of the borrowed deep K could not tell; one
    plain step at batch 4 does, and the level drafts the right K from there."""

    def weight_bound_then_row_bound(batch_size: int, k: int) -> float:
        return 1.0 + (0.005 if batch_size == 1 else 0.35) * k

    policy = AdaptiveSpeculation(max_tokens=6, rates=[0.55, 0.3, 0.5, 0.5, 0.5, 0.5])
    run_steps(policy, 1, 64, weight_bound_then_row_bound)
    ks = run_steps(policy, 4, 12, weight_bound_then_row_bound)
    assert ks[0] >= 3  # borrowed: drafts look nearly free
    assert ks[3] == 0  # the first probe
    best = best_by_hand([0.55, 0.3, 0.5, 0.5, 0.5, 0.5], 4, weight_bound_then_row_bound)
    assert best == 1
    assert ks[4:] == [best] * 8


def test_a_batch_sizes_own_step_times_win_over_a_borrowed_share_in_time() -> None:
    policy = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    run_steps(policy, 1, 64, cpu_like)
    run_steps(policy, 4, 256, cpu_like)
    assert policy.best(4) == best_by_hand(RATES, 4, cpu_like)
    assert policy.draft_share(4) == pytest.approx(0.18, abs=0.02)  # cpu_like: 0.02 + 4 x 0.04


def test_slow_steps_at_a_new_batch_size_do_not_send_it_to_deep_drafts() -> None:
    """On the 2-core CPU the first step at batch 4 took 814 ms and the next ones 140-180: the
    EWMA before priced that K at five times its cost, the line's slope went negative, was
    clamped to free drafts, and the policy drafted its deepest K for the rest of the level."""
    policy = AdaptiveSpeculation(max_tokens=4, rates=list(RATES))
    run_steps(policy, 1, 64, cpu_like)
    steps = 0

    def first_two_slow(batch_size: int, k: int) -> float:
        nonlocal steps
        steps += 1
        return cpu_like(batch_size, k) * (8.0 if steps <= 2 else 1.0)

    ks = run_steps(policy, 4, 30, first_two_slow)
    speeds = tokens_per_second(RATES, 4, cpu_like)
    assert max(ks) <= best_by_hand(RATES, 4, cpu_like) + 1
    assert all(speeds[k] >= 0.96 * max(speeds) for k in ks[4:] if k != 0)  # 0: a probe


def test_step_costs_price_each_k_at_the_lower_quartile_of_its_recent_times() -> None:
    costs = StepCosts(window=8)
    for seconds in (0.9, 5.0, 1.0, 1.1, 1.2, 1.0, 1.3, 1.1):
        costs.observe(2, seconds)
    assert costs.measured() == {2: 1.0}  # the 5 s step moved nothing
    for _ in range(8):  # the window keeps the last 8: older times leave
        costs.observe(2, 2.0)
    assert costs.measured() == {2: 2.0}
    assert costs.timed == {2: 16}


def test_one_measured_k_takes_the_prior_share_and_far_apart_k_timed_often_outweigh_it() -> None:
    costs = StepCosts()
    assert costs.estimate(0, 0.1, prior_weight=2.0) is None
    costs.observe(1, 1.2)
    assert costs.estimate(3, 0.1, prior_weight=2.0) == pytest.approx(1.2 / 1.1 * 1.3)  # prior slope
    for _ in range(20):
        costs.observe(0, 1.0)
        costs.observe(4, 1.8)
    line = costs.line(0.1, prior_weight=2.0)
    assert line is not None
    intercept, slope = line
    assert slope / intercept == pytest.approx(0.2, abs=0.01)  # the data's 0.2, not the prior's 0.1


def test_neighbouring_k_timed_a_few_times_cannot_make_drafts_free() -> None:
    """Two neighbouring K, a little noise, K = 5 timed faster than K = 4: least squares alone
    says drafts cost nothing; the prior's pull keeps a draft's price near the borrowed share."""
    costs = StepCosts()
    for seconds in (1.90, 1.92):
        costs.observe(4, seconds)
    costs.observe(5, 1.85)
    line = costs.line(0.25, prior_weight=2.0)
    assert line is not None
    intercept, slope = line
    assert 0.15 < slope / intercept < 0.25


def test_a_slope_the_data_make_negative_is_flat_and_measured_k_are_read_off_it() -> None:
    """K = 2 timed faster than K = 1, often: noise, since a draft never makes a step cheaper.
    The line is flat, and the two K cost the same whatever their own times say."""
    costs = StepCosts()
    for _ in range(8):
        costs.observe(1, 1.2)
        costs.observe(2, 1.0)
    line = costs.line(0.1, prior_weight=2.0)
    assert line is not None
    assert line[1] == 0.0
    assert costs.estimate(1, 0.1, prior_weight=2.0) == costs.estimate(2, 0.1, prior_weight=2.0)


def test_a_k_not_run_for_a_while_leaves_the_fit() -> None:
    costs = StepCosts(stale_after=4)
    costs.observe(5, 9.0)  # a slow first step, then the policy moved to K = 1..2
    for _ in range(4):
        costs.observe(1, 1.1)
        costs.observe(2, 1.2)
    assert sorted(costs.samples) == sorted(costs.timed) == [1, 2]
    for _ in range(8):  # the two K run last stay, however long ago
        costs.observe(2, 1.2)
    assert sorted(costs.samples) == [1, 2]


def test_a_head_that_is_never_right_stays_plain_even_when_drafting_steps_time_faster() -> None:
    policy = AdaptiveSpeculation(max_tokens=4, probe_every=8, rates=[0.0] * 4)
    ks = run_steps(policy, 1, 64, lambda batch_size, k: 1.0 - 0.05 * k)  # noise: K = 1 "faster"
    # The first probe comes early (step 2: no line yet), then one step in probe_every.
    assert ks == [0, 1] + [0] * 5 + [1] + ([0] * 7 + [1]) * 7


def test_rates_follow_observed_acceptance() -> None:
    policy = AdaptiveSpeculation(max_tokens=4)
    for _ in range(200):
        policy.observe(proposed=4, accepted=0)
    assert policy.num_tokens(1) == 0  # backed off to plain decoding
    assert policy.rates[0] < 0.05
    assert policy.rates[1:] == [pytest.approx(0.7)] * 3  # never judged, never moved
    for _ in range(200):
        policy.observe(proposed=4, accepted=4)
    assert policy.num_tokens(1) == 4


def test_backed_off_policy_drafts_nothing_but_probes_one_step_in_probe_every() -> None:
    policy = AdaptiveSpeculation(max_tokens=4, probe_every=8, rates=[0.01] * 4)
    ks = run_steps(policy, 1, 32, cpu_like)
    assert ks == [0, 1] + [0] * 5 + [1] + ([0] * 7 + [1]) * 3
    # A probe that is accepted again and again brings drafting back.
    for _ in range(100):
        policy.observe(proposed=1, accepted=1)
    assert policy.num_tokens(1) >= 1


def test_probes_alternate_one_more_and_one_fewer_draft() -> None:
    policy = AdaptiveSpeculation(max_tokens=4, probe_every=4, rates=list(RATES))
    run_steps(policy, 4, 64, cpu_like)
    best = policy.best(4)
    assert 0 < best < 4
    ks = run_steps(policy, 4, 16, cpu_like)
    assert sorted(ks[3::4]) == [best - 1, best - 1, best + 1, best + 1]


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_tokens", 0), ("probe_every", 1), ("cost_window", 0), ("prior_slope", -0.1), ("prior_weight", 0.0)],
)
def test_bad_settings_are_refused_by_name(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        AdaptiveSpeculation(**{field: value})  # type: ignore[arg-type]


@dataclass
class FormulaCosts:
    """The real policy, told step costs from a formula instead of this machine's clock (which
    a loaded test machine makes noisy); what the engine reported is kept in ``timed``."""

    policy: AdaptiveSpeculation
    cost: Callable[[int, int], float]
    timed: list[tuple[int, int, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.max_tokens = self.policy.max_tokens

    def num_tokens(self, batch_size: int) -> int:
        return self.policy.num_tokens(batch_size)

    def observe(self, proposed: int, accepted: int) -> None:
        self.policy.observe(proposed, accepted)

    def observe_step(self, batch_size: int, num_tokens: int, seconds: float) -> None:
        self.timed.append((batch_size, num_tokens, seconds))
        self.policy.observe_step(batch_size, num_tokens, self.cost(batch_size, num_tokens))


def serve_alone(
    head: Callable[[PreTrainedModel, list[int]], Eagle3DraftModel],
    policy: SpeculationPolicy,
    new_tokens: int,
) -> tuple[float, int]:
    """Serve PROMPT alone, greedy, output checked against plain decoding; (mean K, engine steps).
    ``head`` gets the target and the whole expected sequence (what an oracle head needs)."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, new_tokens)
    with ServingEngine(target, head(target, PROMPT + expected), speculation=policy) as engine:
        assert engine.generate(GenerationRequest(PROMPT, new_tokens), timeout=60) == expected
        return engine.metrics.mean_speculative_tokens, int(engine.metrics.num_steps._value.get())


def test_engine_drafts_deep_for_a_good_head_and_shallow_for_a_bad_one() -> None:
    good = FormulaCosts(AdaptiveSpeculation(max_tokens=5), cpu_like)
    deep, _ = serve_alone(oracle_head, good, 120)
    bad = FormulaCosts(AdaptiveSpeculation(max_tokens=5), cpu_like)
    # Acceptance starts at the optimistic prior and falls with each rejection, so the first
    # steps draft deep; 200 tokens let the settled part outweigh that (mean K 1.6 at 120).
    shallow, _ = serve_alone(lambda target, _: random_head(target), bad, 200)
    assert good.policy.best(1) == 5
    assert deep > 4.0
    assert bad.policy.best(1) == 0
    assert shallow < 1.5


def test_engine_times_every_decoding_step_and_no_prefill() -> None:
    recorded = FormulaCosts(AdaptiveSpeculation(max_tokens=3), cpu_like)
    _, steps = serve_alone(oracle_head, recorded, 40)
    # The first step prefilled the prompt; every later one decoded and was timed.
    assert len(recorded.timed) == steps - 1 > 5
    assert all(batch == 1 and 0 <= k <= 3 and seconds > 0 for batch, k, seconds in recorded.timed)
    assert max(k for _, k, _ in recorded.timed) == 3


def test_engine_does_not_time_a_step_that_captured_a_cuda_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    # A step whose shape is new captures a graph on a GPU (tens of steps' time, once): its wall
    # time says nothing of its K. Two steps here "capture", as the GPU's graph code counts it.
    captured = CaptureTotals()
    monkeypatch.setattr(serving_engine, "CAPTURED", captured)
    recorded = FormulaCosts(AdaptiveSpeculation(max_tokens=3), cpu_like)
    steps_seen = 0
    choose = recorded.num_tokens

    def capturing_on_steps_3_and_7(batch_size: int) -> int:
        nonlocal steps_seen
        steps_seen += 1
        if steps_seen in (3, 7):
            captured.captures += 1
        return choose(batch_size)

    monkeypatch.setattr(recorded, "num_tokens", capturing_on_steps_3_and_7)
    _, steps = serve_alone(oracle_head, recorded, 40)
    assert captured.captures == 2
    # The prefill and the two capturing steps are not timed; every other step is.
    assert len(recorded.timed) == steps - 3 > 5


def test_engine_with_a_head_that_is_never_right_decodes_almost_plainly() -> None:
    """Adaptive K backs off to plain decoding when nothing is accepted (never slower)."""
    policy = AdaptiveSpeculation(max_tokens=5, prior=0.3, rates=[0.0] * 5, probe_every=16)
    mean_k, _ = serve_alone(lambda target, _: random_head(target), policy, 200)
    assert mean_k < 0.1
