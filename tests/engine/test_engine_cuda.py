"""The engine on a CUDA GPU: graphs replay what the eager step computes; replies and features
agree with the CPU's. Skipped without a GPU (scripts/gpu-check.sh runs them on one)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from engine.cuda_graphs import captures_during
from engine.drafting.batch_draft import BatchDrafter, DraftRequest
from engine.generation import generate_batched
from engine.grouped_attention import grouped_attention
from engine.packed_generation import Recording
from engine.replies import Reply
from engine.runner import SlotRunner
from engine.runner_cache import RunnerCache
from engine.sampling import SamplingParams
from engine.slot_attention import visible_keys
from engine.transfers import float_tables_to, int_tables_to
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from speculative.decoder import SpeculativeDecoder
from tests.engine.reply_checks import token_agreement
from tests.speculative.engine_doubles import hf_greedy, random_head, tiny_target
from trainer.models.tiny import build_tiny_target

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
VOCAB = 96
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)


def test_the_memory_efficient_kernel_takes_a_masked_call_with_folded_groups() -> None:
    # SmolLM2's 9 query heads over 3 key/value heads, in bf16: SDPA's math kernel is the only
    # one that takes a mask with enable_gqa; folded, the memory-efficient kernel runs it.
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 - CUDA-only test

    query = torch.randn(16, 9, 4, 64, device="cuda", dtype=torch.bfloat16)
    keys, values = (torch.randn(16, 3, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    last = torch.randint(4, 255, (16, 1), device="cuda")
    mask = visible_keys(last - torch.arange(3, -1, -1, device="cuda").view(1, 4), 256)
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        folded = grouped_attention(query, keys, values, mask, None, fold=True)
    with sdpa_kernel([SDPBackend.MATH]):
        reference = grouped_attention(query, keys, values, mask, None, fold=False)
    torch.testing.assert_close(folded.float(), reference.float(), atol=2e-2, rtol=2e-2)


def test_a_replayed_decode_graph_equals_the_eager_step() -> None:
    model = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB).to("cuda")
    runner = SlotRunner(model, slots=17, capacity=65, graph_rows=16)
    eager = SlotRunner(model, slots=17, capacity=65)
    assert runner.graphs is not None
    try:
        with torch.inference_mode():
            # One-token decode steps, then verify-like steps of 4 tokens a row; in each, the
            # first call captures and the next ones replay.
            start = 0
            for width in (1, 1, 1, 4, 4):
                ids = torch.randint(3, VOCAB, (5, width), device="cuda")
                at = (start + torch.arange(width, device="cuda")).expand(5, width)
                graphed = runner.decode(ids, at, at, key_length=start + width).hidden.clone()
                plain = eager.forward(ids, at, at, slots=None, key_length=start + width).hidden
                torch.testing.assert_close(graphed, plain, atol=1e-4, rtol=1e-4)
                start += width
    finally:
        runner.close()
        eager.close()


def test_replies_and_features_on_cuda_agree_with_the_cpu() -> None:
    cpu = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)
    gpu = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB).to("cuda")
    gpu.load_state_dict(cpu.state_dict())
    prompts = [torch.randint(3, VOCAB, (n,)).tolist() for n in range(1, 33)]
    recording = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))
    options = {"stop_ids": [VOCAB + 1], "max_new_tokens": 12, "batch_size": 8, "sampling": GREEDY}
    on_cpu, _ = generate_batched(cpu, prompts, recorder=recording.recorder(cpu), **options)  # type: ignore[arg-type]
    on_gpu, _ = generate_batched(gpu, prompts, recorder=recording.recorder(gpu), **options)  # type: ignore[arg-type]
    agree = sum(
        a == b
        for x, y in zip(on_cpu, on_gpu, strict=True)
        if x and y
        for a, b in zip(x.tokens, y.tokens, strict=True)
    )
    assert agree / (12 * len(prompts)) >= 0.99
    first_cpu, first_gpu = on_cpu[0], on_gpu[0]
    assert first_cpu is not None
    assert first_gpu is not None
    assert first_cpu.features is not None
    assert first_gpu.features is not None
    torch.testing.assert_close(
        first_gpu.features.final_hidden, first_cpu.features.final_hidden, atol=1e-3, rtol=1e-3
    )


def test_a_reused_runner_replays_its_graphs_and_replies_as_a_fresh_one() -> None:
    model = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB).to("cuda")
    recording = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))
    options = {"stop_ids": [VOCAB + 1], "max_new_tokens": 12, "batch_size": 8, "sampling": GREEDY}
    calls = [[torch.randint(3, VOCAB, (n,)).tolist() for n in range(1, 30, 2)] for _ in range(2)]

    def run(prompts: list[list[int]], runners: RunnerCache | None) -> tuple[list[Reply | None], int]:
        with captures_during() as captured:
            replies, _ = generate_batched(
                model,
                prompts,
                recorder=recording.recorder(model),
                runners=runners,
                **options,  # type: ignore[arg-type]
            )
        return replies, captured().captures

    fresh = [run(prompts, None) for prompts in calls]
    with RunnerCache(model) as runners:
        reused = [run(prompts, runners) for prompts in calls]
        assert runners.built == 1
    for (expected, _), (replies, _) in zip(fresh, reused, strict=True):
        assert [r.tokens for r in replies if r] == [r.tokens for r in expected if r]
    assert reused[1][1] < fresh[1][1]  # the second call replays the first call's graphs


def test_replies_read_a_step_late_agree_with_replies_read_at_once() -> None:
    # The GPU's default schedule reads step k's ended rows once step k+1 is queued; rows leave
    # and join a step later, so batches differ and a near-tie may flip: 99 % of tokens agree.
    model = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB).to("cuda")
    recording = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))
    prompts = [torch.randint(3, VOCAB, (1 + n % 9,)).tolist() for n in range(60)]
    options = {"max_new_tokens": 12, "batch_size": 8, "sampling": GREEDY}
    free, _ = generate_batched(model, prompts, stop_ids=[VOCAB + 1], **options)  # type: ignore[arg-type]
    # The tokens a row switches to: rows end at many steps.
    stops = sorted({t for r in free if r for t in r.tokens[1:] if t != r.tokens[0]}) or [VOCAB + 1]
    runs = [
        generate_batched(
            model,
            prompts,
            stop_ids=stops,
            recorder=recording.recorder(model),
            overlap=overlap,
            **options,  # type: ignore[arg-type]
        )[0]
        for overlap in (False, True)
    ]
    at_once, late = runs
    assert token_agreement(at_once, late) >= 0.99
    for a, b in zip(at_once, late, strict=True):
        if a is not None and b is not None and (a.tokens, a.stop_token) == (b.tokens, b.stop_token):
            assert a.features is not None
            assert b.features is not None
            torch.testing.assert_close(b.features.final_hidden, a.features.final_hidden, atol=1e-3, rtol=1e-3)


def test_int_and_float_tables_reach_the_gpu_intact() -> None:
    ids, positions = int_tables_to(torch.device("cuda"), [[4, 5], [6, 7]], np.arange(3))
    (temperatures,) = float_tables_to(torch.device("cuda"), [0.7, 0.0])
    torch.cuda.synchronize()
    assert ids.device.type == temperatures.device.type == "cuda"
    assert ids.tolist() == [4, 5, 6, 7]
    assert positions.tolist() == [0, 1, 2]
    assert temperatures.dtype == torch.float32
    torch.testing.assert_close(temperatures.cpu(), torch.tensor([0.7, 0.0]))


def test_the_batch_drafter_on_cuda_drafts_what_it_drafts_on_the_cpu() -> None:
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=3)
    vocab, width = int(target.config.vocab_size), 3 * int(target.config.hidden_size)
    generator = torch.Generator().manual_seed(0)
    features = [torch.randn(5 + row, width, generator=generator) for row in range(6)]
    ids = [torch.randint(3, vocab, (5 + row,), generator=generator).tolist() for row in range(6)]
    drafts = {}
    for device in ("cpu", "cuda"):
        drafter = BatchDrafter(copy.deepcopy(head).to(device), vocab, max_sequences=6)
        requests = [
            DraftRequest(drafter.slots.acquire(), feature.to(device), row_ids, 4, SamplingParams(), None)
            for feature, row_ids in zip(features, ids, strict=True)
        ]
        with torch.inference_mode():
            drafts[device] = [proposal.token_ids.tolist() for proposal in drafter.propose(requests)]
    same = sum(
        a == b for x, y in zip(drafts["cpu"], drafts["cuda"], strict=True) for a, b in zip(x, y, strict=True)
    )
    assert same / 24 >= 0.9


@pytest.mark.parametrize("sampled", [False, True])
def test_a_replayed_proposal_drafts_what_the_eager_one_drafts(
    sampled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=4).to("cuda")
    vocab, width = int(target.config.vocab_size), 3 * int(target.config.hidden_size)
    graphed = BatchDrafter(head, vocab, max_sequences=6)
    monkeypatch.setenv("EAGLENEST_CUDA_GRAPHS", "0")
    eager = BatchDrafter(head, vocab, max_sequences=6)
    assert graphed._graphs is not None
    assert eager._graphs is None
    generator = torch.Generator().manual_seed(1)
    drafts: dict[str, list[list[int]]] = {"graphed": [], "eager": []}
    # Every other row samples, from a generator seeded alike for both drafters.
    params = [SamplingParams(0.8, 0.9) if sampled and slot % 2 else SamplingParams() for slot in range(6)]
    # Rounds of 6 and then 3 sequences: the second replays a graph padded past its rows.
    for round_index, (batch, new) in enumerate(((6, 7), (3, 2), (6, 3))):
        features = [torch.randn(new, width, generator=generator).to("cuda") for _ in range(batch)]
        ids = [torch.randint(3, vocab, (new,), generator=generator).tolist() for _ in range(batch)]
        for name, drafter in (("graphed", graphed), ("eager", eager)):
            requests = [
                DraftRequest(
                    slot,
                    feature,
                    row_ids,
                    4,
                    params[slot],
                    torch.Generator(device="cuda").manual_seed(10 * round_index + slot),
                )
                for slot, feature, row_ids in zip(range(batch), features, ids, strict=True)
            ]
            for slot in range(batch):
                if slot >= drafter.slots.in_use:
                    drafter.slots.acquire()
            with torch.inference_mode():
                made = drafter.propose(requests)
            drafts[name] += [proposal.token_ids.tolist() for proposal in made]
            for proposal, request in zip(made, requests, strict=True):
                assert (proposal.probs is None) == request.params.greedy
    assert graphed._graphs is not None
    assert not graphed._graphs.broken
    assert graphed._graphs.captures == 3  # one a width: 7, 2 and 3 new entries
    same = sum(
        a == b
        for x, y in zip(drafts["graphed"], drafts["eager"], strict=True)
        for a, b in zip(x, y, strict=True)
    )
    assert same / (4 * 15) >= 0.9


def test_serving_on_cuda_replays_steps_and_agrees_with_greedy_decoding() -> None:
    reference = tiny_target("LlamaForCausalLM")  # the same weights, decoded by transformers on the CPU
    reference.generation_config.eos_token_id = None
    prompts = [[5, 17, 33, 8, 41, 12], [9, 9, 3], [70, 1, 5, 6, 7, 8, 9, 10], [4]]
    expected = [hf_greedy(reference, prompt, 24) for prompt in prompts]
    target = tiny_target("LlamaForCausalLM").to("cuda")
    target.load_state_dict(reference.state_dict())
    target.generation_config.eos_token_id = None
    with ServingEngine(
        target, random_head(target, seed=2), speculation=FixedSpeculation(3), max_batch_size=3
    ) as engine:
        outputs = [handle.wait(120) for handle in [engine.submit(GenerationRequest(p, 24)) for p in prompts]]
        # Read while the engine is open: closing it releases the runner's graphs (graphs = None).
        runner = getattr(engine.target, "runner", None)
        assert runner is not None
        assert runner.graphs is not None
        captures = runner.graphs.captures
    agree = sum(
        a == b for out, exp in zip(outputs, expected, strict=True) for a, b in zip(out, exp, strict=True)
    )
    assert agree / (24 * len(prompts)) >= 0.99
    assert captures >= 1


def test_overlapped_plain_serving_on_cuda_agrees_with_reading_each_step_at_once() -> None:
    """A GPU's default: the host queues step k+1, fed step k's tokens on the device, before
    it reads step k (serving.step_rows). Rows end at EOS at different steps, more requests
    than rows join as slots free, and sampled rows draw from their own seeded generators."""
    target = tiny_target("LlamaForCausalLM").to("cuda")
    target.generation_config.eos_token_id = None
    prompts = [[5, 17, 33, 8, 41, 12], [9, 9, 3], [70, 1, 5, 6, 7, 8, 9, 10], [4], [30, 31], [8, 8, 8, 2]]
    sampled = SamplingParams(temperature=0.8, top_p=0.9)

    def serve(overlap: bool, eos: list[int]) -> list[list[int]]:
        with ServingEngine(target, max_batch_size=3, eos_token_ids=eos, overlap=overlap) as engine:
            handles = [
                engine.submit(GenerationRequest(p, 20, sampling=sampled if i % 2 else GREEDY, seed=i))
                for i, p in enumerate(prompts)
            ]
            return [handle.wait(120) for handle in handles]

    plain = serve(False, [])
    eos = sorted({reply[3 + i] for i, reply in enumerate(plain[:3])})
    at_once, overlapped = serve(False, eos), serve(True, eos)
    positions = sum(max(len(a), len(b)) for a, b in zip(at_once, overlapped, strict=True))
    same = sum(x == y for a, b in zip(at_once, overlapped, strict=True) for x, y in zip(a, b, strict=False))
    assert same / positions >= 0.99
    assert any(len(reply) < 20 for reply in at_once)  # some rows ended at EOS


def test_packed_verification_and_distributions_on_cuda_agree_with_row_by_row() -> None:
    # On a GPU a batch's rows are packed and gathered (engine.sampling.packs_rows); each row's
    # verdict and distribution must be what it gets alone.
    from engine.sampling import probabilities, rows_probabilities  # noqa: PLC0415 - CUDA-only test
    from speculative.verification import (  # noqa: PLC0415 - CUDA-only test
        greedy_verdicts,
        read_verdicts,
        sampled_verdicts,
        verify_greedy,
        verify_sampled,
    )

    generator = torch.Generator().manual_seed(9)
    counts = [0, 3, 1, 4, 2]
    logits = [(torch.randn(n + 1, VOCAB, generator=generator) * 3).cuda() for n in counts]
    settings = [SamplingParams(0.7 + 0.1 * row, 0.9) for row in range(len(counts))]
    target_probs = rows_probabilities(logits, settings)
    for rows, row_logits, setting in zip(target_probs, logits, settings, strict=True):
        torch.testing.assert_close(rows, probabilities(row_logits, setting))

    drafts = [row[:-1].argmax(dim=-1) for row in logits]
    assert read_verdicts(greedy_verdicts(drafts, logits)) == [
        verify_greedy(ids, row) for ids, row in zip(drafts, logits, strict=True)
    ]

    draft_probs = [torch.softmax(torch.randn(n, VOCAB, generator=generator), -1).cuda() for n in counts]
    draft_ids = [
        torch.multinomial(q, 1)[:, 0] if len(q) else torch.empty(0, dtype=torch.long, device="cuda")
        for q in draft_probs
    ]

    def seeded(row: int) -> torch.Generator:
        return torch.Generator(device="cuda").manual_seed(100 + row)

    batched = read_verdicts(
        sampled_verdicts(draft_ids, draft_probs, target_probs, [seeded(row) for row in range(len(counts))])
    )
    alone = [
        verify_sampled(ids, q, p, seeded(row))
        for row, (ids, q, p) in enumerate(zip(draft_ids, draft_probs, target_probs, strict=True))
    ]
    assert batched == alone


def test_on_cuda_a_rounds_time_is_split_by_the_streams_events() -> None:
    # The head's kernels are queued without a read-back: the host clock would book them to the
    # verification. The events' split is positive on both sides and within the call's time.
    target = tiny_target("LlamaForCausalLM").to("cuda")
    decoder = SpeculativeDecoder(target, random_head(target, seed=1), num_speculative_tokens=3)
    decoder.generate([5, 6, 7, 8], max_new_tokens=8)  # captures its graphs
    result = decoder.generate([5, 6, 7, 8], max_new_tokens=32)
    assert result.num_verify_steps >= 1
    assert result.draft_seconds > 0
    assert result.target_seconds > 0
    assert result.prefill_seconds + result.draft_seconds + result.target_seconds <= result.seconds * 1.01
