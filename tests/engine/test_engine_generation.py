"""Continuous batching on the slot pool: the target's replies, one attention call per layer."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import PreTrainedModel

from engine.generation import batching_supported, generate_batched
from engine.kv_pool import SlotKVPool, pool_dtype
from engine.packed_generation import Recording, generate_packed
from engine.replies import Reply
from engine.sampling import SamplingParams
from tests.engine.reply_checks import assert_same_replies_and_features, token_agreement
from trainer.models.tiny import build_tiny_target

VOCAB = 96
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)
PROMPTS = [[5, 17, 33, 8], [40, 2, 71], [9, 9, 12, 60, 61, 3], [25], [30, 31, 32, 33, 34]]
NEVER = VOCAB + 1  # a stop id never generated: rows end at the length cap
RECORDING = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))


@pytest.fixture(scope="module")
def target() -> PreTrainedModel:
    return build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)


def greedy_alone(model: PreTrainedModel, prompt: list[int], steps: int) -> list[int]:
    """Batch-1 greedy tokens from transformers' generate (no stop token)."""
    output = model.generate(  # type: ignore[operator]
        torch.tensor([prompt]), do_sample=False, max_new_tokens=steps, min_new_tokens=steps, pad_token_id=0
    )
    return [int(t) for t in output[0, len(prompt) :].tolist()]


def tokens_of(replies: list[Reply | None]) -> list[tuple[list[int], int | None]]:
    return [(r.tokens, r.stop_token) for r in replies if r is not None]


@pytest.fixture
def attention_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batch size of every SDPA call (slot attention's, and transformers' own)."""
    calls: list[int] = []
    original = torch.nn.functional.scaled_dot_product_attention

    def counting(query: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(int(query.shape[0]))
        return original(query, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    return calls


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "GptOssForCausalLM"])
def test_batch_one_replies_equal_generate_token_for_token(architecture: str) -> None:
    # GPT-OSS: sliding-window layers and attention sinks on the slot pool.
    model = build_tiny_target(architecture, vocab_size=VOCAB)
    alone = [greedy_alone(model, prompt, 6) for prompt in PROMPTS]
    replies, stopped = generate_batched(
        model, PROMPTS, stop_ids=[NEVER], max_new_tokens=6, batch_size=1, sampling=GREEDY
    )
    assert not stopped
    assert tokens_of(replies) == [(tokens, None) for tokens in alone]


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "GptOssForCausalLM"])
def test_a_bf16_target_on_cpu_attends_over_fp32_keys_and_replies_as_generate_does(
    architecture: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bf16 weights (the distillation copy on a CPU with AVX512-BF16), fp32 keys and values:
    # the CPU's bf16 flash attention is ~5x slower at one query per row (engine/kv_pool.py).
    model = build_tiny_target(architecture, vocab_size=VOCAB)
    torch.nn.Module.to(model, torch.bfloat16)
    pool_dtypes: set[torch.dtype] = set()
    allocate = SlotKVPool.layer

    def spying(pool: SlotKVPool, layer: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = allocate(pool, layer, like)
        pool_dtypes.update({keys.dtype, values.dtype})
        return keys, values

    monkeypatch.setattr(SlotKVPool, "layer", spying)
    alone = [greedy_alone(model, prompt, 6) for prompt in PROMPTS]
    replies, _ = generate_batched(
        model, PROMPTS, stop_ids=[NEVER], max_new_tokens=6, batch_size=3, sampling=GREEDY
    )
    assert pool_dtypes == {torch.float32}
    # transformers attends in bf16, the pool in fp32: the replies are still the target's.
    assert tokens_of(replies) == [(tokens, None) for tokens in alone]


@pytest.mark.parametrize(
    ("dtype", "kept"),
    [(torch.bfloat16, torch.float32), (torch.float16, torch.float32), (torch.float32, torch.float32)],
)
def test_a_cpu_pool_keeps_half_precision_keys_in_fp32(dtype: torch.dtype, kept: torch.dtype) -> None:
    assert pool_dtype(torch.zeros(1, dtype=dtype)) == kept


def test_rows_joining_and_leaving_agree_with_the_exact_path_on_99_percent_of_tokens(
    target: PreTrainedModel,
) -> None:
    generator = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, VOCAB, (int(n),), generator=generator).tolist() for n in range(1, 25)]
    free, _ = generate_batched(
        target, prompts, stop_ids=[NEVER], max_new_tokens=16, batch_size=6, sampling=GREEDY
    )
    # A random model mostly repeats a token; the tokens it switches to end rows at many steps.
    stops = sorted({t for r in free if r is not None for t in r.tokens[1:] if t != r.tokens[0]})
    options: dict[str, Any] = {"stop_ids": stops, "max_new_tokens": 16, "batch_size": 6, "sampling": GREEDY}
    exact, _ = generate_packed(target, prompts, **options)
    batched, _ = generate_batched(target, prompts, **options)
    assert len({len(r.tokens) for r in batched if r is not None}) > 3, "precondition: ragged ends"
    assert token_agreement(exact, batched) >= 0.99


def test_attention_calls_per_step_do_not_grow_with_the_rows(
    target: PreTrainedModel, attention_calls: list[int]
) -> None:
    layers = target.config.num_hidden_layers
    counts = {}
    for rows in (1, 8):
        attention_calls.clear()
        generate_batched(
            target, [[5, 6, 7]] * rows, stop_ids=[NEVER], max_new_tokens=5, batch_size=rows, sampling=GREEDY
        )
        # One prefill forward, then 4 decode steps: one call per layer each, over every row.
        counts[rows] = len(attention_calls)
        assert set(attention_calls) == {rows}
    assert counts[1] == counts[8] == layers * 5


def test_a_row_that_ends_hands_its_slot_to_the_next_prompt(
    target: PreTrainedModel, attention_calls: list[int]
) -> None:
    prompts = PROMPTS[:3]
    alone = [greedy_alone(target, prompt, 4) for prompt in prompts]
    stop = alone[0][0]
    assert all(stop not in tokens for tokens in alone[1:]), "precondition: only the first row stops early"
    attention_calls.clear()
    replies, _ = generate_batched(
        target, prompts, stop_ids=[stop], max_new_tokens=4, batch_size=2, sampling=GREEDY
    )
    assert tokens_of(replies) == [([], stop), (alone[1], None), (alone[2], None)]
    forwards = len(attention_calls) // target.config.num_hidden_layers
    # Prefill (0, 1) + a decode; row 0 ended in the prefill, so prompt 2 joins at the next
    # step: its prefill + 3 decodes. Fixed batches would need 2 prefills and 6 decodes.
    assert forwards == 6


def test_should_stop_returns_rows_in_flight_cut_and_never_started_ones_as_none(
    target: PreTrainedModel,
) -> None:
    checks: list[int] = []

    def stop_after_two_steps() -> bool:
        checks.append(1)
        return len(checks) > 2

    replies, stopped = generate_batched(
        target,
        PROMPTS,
        stop_ids=[NEVER],
        max_new_tokens=8,
        batch_size=2,
        sampling=GREEDY,
        should_stop=stop_after_two_steps,
    )
    assert stopped
    # Each step: the prefill's token, then one more per decode (two steps ran).
    assert [None if r is None else (len(r.tokens), r.stop_token) for r in replies] == [
        (3, None),
        (3, None),
        None,
        None,
        None,
    ]


def test_recorded_features_match_the_exact_path(target: PreTrainedModel) -> None:
    prefix = [7, 11, 13]
    prompts = [[*prefix, 20, 21], [*prefix, 30], [40, 41, 42], prefix, *PROMPTS]
    options: dict[str, Any] = {"stop_ids": [NEVER], "max_new_tokens": 4, "batch_size": 3, "sampling": GREEDY}
    exact, _ = generate_packed(target, prompts, recording=RECORDING, **options)
    batched, _ = generate_batched(
        target, prompts, recorder=RECORDING.recorder(target), shared_prefix=prefix, **options
    )
    assert_same_replies_and_features(exact, batched)


def test_sampled_replies_follow_the_seed_and_stay_in_the_vocabulary(target: PreTrainedModel) -> None:
    sampling = SamplingParams(temperature=1.0, top_p=0.9)
    runs = []
    for _ in range(2):
        torch.manual_seed(11)
        replies, _ = generate_batched(
            target, PROMPTS, stop_ids=[NEVER], max_new_tokens=6, batch_size=3, sampling=sampling
        )
        runs.append(tokens_of(replies))
    assert runs[0] == runs[1]
    assert all(0 <= t < VOCAB for tokens, _ in runs[0] for t in tokens)
    assert runs[0] != tokens_of(
        generate_batched(target, PROMPTS, stop_ids=[NEVER], max_new_tokens=6, batch_size=3, sampling=GREEDY)[
            0
        ]
    )


def test_the_model_comes_back_with_its_own_attention(target: PreTrainedModel) -> None:
    before = target.config._attn_implementation
    generate_batched(target, PROMPTS[:1], stop_ids=[1], max_new_tokens=2, batch_size=1, sampling=GREEDY)
    assert target.config._attn_implementation == before


def test_recurrent_targets_are_not_batched_and_bad_arguments_are_refused(target: PreTrainedModel) -> None:
    assert batching_supported(build_tiny_target("GptOssForCausalLM", vocab_size=VOCAB))
    assert not batching_supported(build_tiny_target("Qwen3NextForCausalLM", vocab_size=VOCAB))
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        generate_batched(target, [[1], []], stop_ids=[2], max_new_tokens=2, batch_size=1, sampling=GREEDY)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1, got 0"):
        generate_batched(target, [[1]], stop_ids=[2], max_new_tokens=0, batch_size=1, sampling=GREEDY)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        generate_batched(target, [[1]], stop_ids=[2], max_new_tokens=1, batch_size=0, sampling=GREEDY)
    with pytest.raises(ValueError, match="join_at must be >= 1, got 0"):
        generate_batched(
            target, [[1]], stop_ids=[2], max_new_tokens=1, batch_size=1, sampling=GREEDY, join_at=0
        )


def test_rows_still_running_move_to_the_front_once_no_prompt_waits(
    target: PreTrainedModel, attention_calls: list[int]
) -> None:
    prompts = PROMPTS[:3]
    alone = [greedy_alone(target, prompt, 6) for prompt in prompts]
    stop = alone[0][0]
    assert all(stop not in tokens for tokens in alone[1:]), "precondition: only the first row stops early"
    attention_calls.clear()
    replies, _ = generate_batched(
        target, prompts, stop_ids=[stop], max_new_tokens=6, batch_size=3, sampling=GREEDY
    )
    # Slot 0 ends in the prefill; slot 2 moves into it, so later decode steps run 2 rows, not 3.
    assert tokens_of(replies) == [([], stop), (alone[1], None), (alone[2], None)]
    assert attention_calls[-1] == 2


# Operators that read a size back from a GPU (a sync that stalls the queue mid-step): those whose
# output size depends on the data, and isin, whose kernel calls unique on ten or more elements
# (the mode sees isin alone, not the operators its kernel calls).
DATA_DEPENDENT_SIZES = {"_unique", "_unique2", "unique_dim", "unique_consecutive", "nonzero", "masked_select"}
DATA_DEPENDENT_SIZES |= {"isin"}


class _OperatorNames(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_a_step_of_many_rows_runs_no_operator_of_data_dependent_size(target: PreTrainedModel) -> None:
    # Twelve rows against two stop ids: where torch.isin would switch to sorting after unique.
    prompts = [[(7 * i + j) % VOCAB for j in range(3 + i % 4)] for i in range(12)]
    with _OperatorNames() as seen:
        replies, _ = generate_batched(
            target, prompts, stop_ids=[NEVER, VOCAB + 2], max_new_tokens=4, batch_size=12, sampling=GREEDY
        )
    assert all(reply is not None and len(reply.tokens) == 4 for reply in replies)
    assert not seen.names & DATA_DEPENDENT_SIZES
    assert "eq" in seen.names  # the stop check ran under the mode
