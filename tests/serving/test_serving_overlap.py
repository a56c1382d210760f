"""Plain serving steps overlapped (``ServingEngine(overlap=True)``, a GPU's default): the host
queues step k+1, each row fed step k's token on the device, before it reads step k. Forced on
here on a CPU, where both orders run the same operations one after another: the replies are
the ones read at once gives, rows that end at EOS run one step dead and are dropped (their
streams end once), and rows that end by length leave without a dead step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from transformers import PreTrainedModel

from engine.sampling import SamplingParams
from serving import GenerationRequest, ServingEngine
from serving.requests import TokenEvent
from serving.step_verification import QueuedVerdicts, RowVerdict
from tests.speculative.engine_doubles import hf_greedy, random_head, tiny_target

SAMPLED = SamplingParams(temperature=0.8, top_p=0.9)
_GENERATOR = torch.Generator().manual_seed(11)
PROMPTS = [torch.randint(3, 60, (1 + i % 7,), generator=_GENERATOR).tolist() for i in range(14)]
NEW_TOKENS = [3 + (5 * i) % 17 for i in range(14)]


@dataclass
class CyclingSpeculation:
    """K from a fixed cycle, step after step: plain steps (overlapped) around speculative ones
    (which read whatever is queued first)."""

    cycle: list[int]
    max_tokens: int = 3
    steps: int = field(default=0, init=False)

    def num_tokens(self, batch_size: int) -> int:
        self.steps += 1
        return self.cycle[self.steps % len(self.cycle)]

    def observe(self, proposed: int, accepted: int) -> None:
        return None

    def observe_step(self, batch_size: int, num_tokens: int, seconds: float) -> None:
        return None


def _requests() -> list[GenerationRequest]:
    return [
        GenerationRequest(prompt, new, sampling=SAMPLED if i % 3 == 1 else SamplingParams(), seed=i)
        for i, (prompt, new) in enumerate(zip(PROMPTS, NEW_TOKENS, strict=True))
    ]


def _serve(
    target: PreTrainedModel, *, overlap: bool, eos: list[int], **options: Any
) -> list[tuple[list[int], str]]:
    """Every request's tokens and finish reason, as its stream of events delivered them; a
    stream that ended twice (a dead row's output delivered) fails here."""
    streams: list[list[TokenEvent]] = [[] for _ in PROMPTS]
    with ServingEngine(target, max_batch_size=4, eos_token_ids=eos, overlap=overlap, **options) as engine:
        handles = [engine.submit(request, streams[i].append) for i, request in enumerate(_requests())]
        outputs = [handle.wait(60) for handle in handles]
    for stream in streams:
        assert [event.finish_reason is not None for event in stream] == [False] * (len(stream) - 1) + [True]
    streamed = [[token for event in stream for token in event.token_ids] for stream in streams]
    assert streamed == outputs
    return [(output, str(handle.finish_reason)) for output, handle in zip(outputs, handles, strict=True)]


def _eos_tokens(target: PreTrainedModel) -> list[int]:
    """Tokens the replies reach after a few steps: rows end at EOS at many different steps."""
    replies = _serve(target, overlap=False, eos=[])
    return sorted({reply[2 + i % 4] for i, (reply, _) in enumerate(replies) if len(reply) > 6})[:3]


@pytest.mark.parametrize("attention", ["slots", "packed"])
def test_overlapped_plain_steps_give_the_replies_read_at_once_gives(attention: str) -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    eos = _eos_tokens(target)
    at_once = _serve(target, overlap=False, eos=eos, attention=attention)
    overlapped = _serve(target, overlap=True, eos=eos, attention=attention)
    assert overlapped == at_once
    assert {reason for _, reason in at_once} == {"eos", "length"}


def test_speculative_steps_between_overlapped_ones_read_what_is_queued_first() -> None:
    """K changes from step to step: a speculative step reads the queued plain step before it
    drafts. Greedy rows on the CPU's exact target give plain greedy decoding's tokens whatever
    K each step ran (sampled rows would draw differently with another K)."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    with ServingEngine(
        target,
        random_head(target),
        max_batch_size=4,
        eos_token_ids=[],
        overlap=True,
        attention="packed",
        speculation=CyclingSpeculation([0, 0, 2, 0, 3, 1, 0, 0, 0]),
    ) as engine:
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
        outputs = [handle.wait(60) for handle in handles]
    assert outputs == [hf_greedy(target, p, n) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
    assert sum(sum(handle.stats.proposed_per_step) for handle in handles) > 0


def test_the_host_reads_a_plain_step_only_after_queueing_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    events: list[str] = []
    read = QueuedVerdicts.read

    def logged_read(queued: QueuedVerdicts) -> list[RowVerdict]:
        events.append("read")
        return read(queued)

    monkeypatch.setattr(QueuedVerdicts, "read", logged_read)
    with ServingEngine(target, max_batch_size=4, eos_token_ids=[], overlap=True, attention="slots") as engine:
        forward = engine.target.forward

        def logged_forward(segments: Any) -> Any:
            events.append("forward")
            return forward(segments)

        monkeypatch.setattr(engine.target, "forward", logged_forward)
        handles = [engine.submit(GenerationRequest(prompt, 12)) for prompt in PROMPTS[:4]]
        [handle.wait(60) for handle in handles]
    # Every read but the batch's last comes after the next step's forward was queued: the
    # forwards run one ahead of the reads.
    reads = [index for index, event in enumerate(events) if event == "read"]
    # The prompts' step and 11 more: no step runs past the rows' last token (they end by
    # length, which the host knows without reading).
    assert events.count("forward") == 12
    assert len(reads) == 12
    for index in reads[:-1]:
        forwards_before = events[:index].count("forward")
        reads_before = events[:index].count("read")
        assert forwards_before == reads_before + 2


def test_requests_that_fill_their_pool_positions_finish() -> None:
    """A row's last token is never fed (it ends the row), so even a dead step fits the pool."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    target.config.max_position_embeddings = 24  # the pool holds 24 positions a sequence
    prompts = [PROMPTS[5], PROMPTS[6], [9] * 20]
    wanted = [24 - len(prompt) for prompt in prompts]  # every position of the pool
    with ServingEngine(target, max_batch_size=2, eos_token_ids=[], overlap=True, attention="slots") as engine:
        assert engine.max_sequence_length == 24
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(prompts, wanted, strict=True)]
        outputs = [handle.wait(60) for handle in handles]
    assert [len(output) for output in outputs] == wanted
    assert all(handle.finish_reason == "length" for handle in handles)


def test_a_cpu_reads_each_step_at_once_by_default() -> None:
    target = tiny_target("LlamaForCausalLM")
    with ServingEngine(target, max_batch_size=2) as engine:
        assert engine.overlap is False
