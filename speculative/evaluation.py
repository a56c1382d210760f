"""Plain vs speculative decoding over a set of prompts: tau, acceptance, tokens/s, speedup.

Both sides run in the same process on the same engine, prompt by prompt, one right after
the other, so a change in machine load hits both alike. The first call of each side is a
warm-up and is never counted, and neither is the time of a CUDA graph captured during a
timed call (a one-time cost of each new shape, which a GPU's speculative side meets far more
often than its plain side): it is reported apart (``capture_seconds``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.cuda_graphs import captures_during
from engine.drafting.tree_draft import TreeShape
from speculative.decoder import SpeculativeDecoder
from speculative.result import GenerationResult, acceptance_by_position
from trainer.data.schema import Conversation, prompt_messages
from trainer.data.tokenize import render_chat


@dataclass(slots=True)
class SideTotals:
    """Sums over every prompt of one decoding mode."""

    tokens: int = 0
    seconds: float = 0.0
    prefill_seconds: float = 0.0
    draft_seconds: float = 0.0
    target_seconds: float = 0.0  # target forwards after the prefill
    target_forwards: int = 0
    prefills: int = 0

    def add(self, result: GenerationResult) -> None:
        self.tokens += len(result.token_ids)
        self.seconds += result.seconds
        self.prefill_seconds += result.prefill_seconds
        self.draft_seconds += result.draft_seconds
        self.target_seconds += result.target_seconds
        self.target_forwards += result.num_target_forwards
        self.prefills += 1

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens after the first over the time after the prefill (time per output token)."""
        seconds = self.seconds - self.prefill_seconds
        return (self.tokens - self.prefills) / seconds if seconds > 0 else 0.0

    @property
    def seconds_per_forward(self) -> float:
        """Mean time of a target forward after the prefill (a decode step or a verification)."""
        forwards = self.target_forwards - self.prefills
        return self.target_seconds / forwards if forwards else 0.0


@dataclass(slots=True)
class SpeedupReport:
    """One drafting setting's comparison (a chain of K, or a tree); build it with ``add`` per prompt."""

    k: int  # drafts per verification at most: the chain's length, the tree's depth
    max_new_tokens: int
    tree: TreeShape | None = None
    prompts: int = 0
    identical_outputs: int = 0
    # Tokens before the first difference from plain decoding, over plain decoding's tokens: 1.0
    # where greedy speculative output is bit-exact (CPU); on a GPU a batch-shape change in the
    # last bits of a near-tie can set the two apart, as in vLLM and SGLang.
    agreeing_tokens: int = 0
    plain: SideTotals = field(default_factory=SideTotals)
    speculative: SideTotals = field(default_factory=SideTotals)
    accepted_per_step: list[int] = field(default_factory=list)
    proposed_per_step: list[int] = field(default_factory=list)
    prompt_speedups: list[float] = field(default_factory=list)
    verified_tokens: int = 0
    # CUDA graph captures left out of this report's two sides. Every K shares one plain run a
    # prompt, so its captures are in each K's figure: a figure per report, not a share of a sum.
    capture_seconds: float = 0.0

    def add(self, plain: GenerationResult, speculative: GenerationResult) -> None:
        self.prompts += 1
        self.verified_tokens += speculative.verified_tokens
        if plain.tokens_per_second > 0:
            self.prompt_speedups.append(speculative.tokens_per_second / plain.tokens_per_second)
        self.identical_outputs += int(plain.token_ids == speculative.token_ids)
        self.agreeing_tokens += next(
            (
                i
                for i, (a, b) in enumerate(zip(plain.token_ids, speculative.token_ids, strict=False))
                if a != b
            ),
            min(len(plain.token_ids), len(speculative.token_ids)),
        )
        self.plain.add(plain)
        self.speculative.add(speculative)
        self.accepted_per_step.extend(speculative.accepted_per_step)
        self.proposed_per_step.extend(speculative.proposed_per_step)

    @property
    def token_agreement(self) -> float:
        return self.agreeing_tokens / self.plain.tokens if self.plain.tokens else 1.0

    @property
    def verify_steps(self) -> int:
        return len(self.accepted_per_step)

    @property
    def label(self) -> str:
        return f"K={self.k}" if self.tree is None else f"tree {self.tree}"

    @property
    def tokens_per_verification(self) -> float:
        """Tokens the target scores per verification: K+1 for a chain, nodes+1 for a tree."""
        return self.verified_tokens / self.verify_steps if self.verify_steps else 0.0

    @property
    def tau(self) -> float:
        steps = self.verify_steps
        return (sum(self.accepted_per_step) + steps) / steps if steps else 0.0

    @property
    def acceptance_by_position(self) -> list[float]:
        return acceptance_by_position(self.accepted_per_step, self.proposed_per_step)

    @property
    def speedup(self) -> float:
        plain = self.plain.tokens_per_second
        return self.speculative.tokens_per_second / plain if plain > 0 else 0.0

    @property
    def decode_speedup(self) -> float:
        """Speedup of the decode phase alone (both sides pay the same prefill)."""
        plain = self.plain.decode_tokens_per_second
        return self.speculative.decode_tokens_per_second / plain if plain > 0 else 0.0

    @property
    def median_prompt_speedup(self) -> float:
        """Median of per-prompt speedups: steadier than the total when the machine's load changes."""
        return statistics.median(self.prompt_speedups) if self.prompt_speedups else 0.0

    @property
    def draft_share(self) -> float:
        """Share of speculative decoding time spent in the head."""
        return self.speculative.draft_seconds / self.speculative.seconds if self.speculative.seconds else 0.0

    @property
    def verify_cost_ratio(self) -> float:
        """A verification of up to K+1 tokens, relative to one plain decode step."""
        single = self.plain.seconds_per_forward
        return self.speculative.seconds_per_forward / single if single else 0.0

    @property
    def draft_seconds_per_step(self) -> float:
        return self.speculative.draft_seconds / self.verify_steps if self.verify_steps else 0.0

    @property
    def overhead_share(self) -> float:
        """Share of speculative time outside prefill, drafting and target forwards (bookkeeping)."""
        side = self.speculative
        other = side.seconds - side.prefill_seconds - side.draft_seconds - side.target_seconds
        return other / side.seconds if side.seconds else 0.0

    def limits(self) -> str:
        """Where the speedup goes: per verification, tau tokens cost one verification plus
        the drafting, against tau plain decode steps."""
        single = self.plain.seconds_per_forward
        if not single or not self.verify_steps:
            return "no verification steps were measured"
        draft = self.draft_seconds_per_step / single
        return (
            f"per step: tau {self.tau:.2f} tokens for verify {self.verify_cost_ratio:.2f} + "
            f"draft {draft:.2f} decode-steps -> decode-only bound "
            f"{self.tau / (self.verify_cost_ratio + draft):.2f}x"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "drafting": self.label,
            "tree": None if self.tree is None else str(self.tree),
            "tokens_per_verification": self.tokens_per_verification,
            "max_new_tokens": self.max_new_tokens,
            "prompts": self.prompts,
            "identical_outputs": self.identical_outputs,
            "token_agreement": self.token_agreement,
            "tau": self.tau,
            "acceptance_by_position": self.acceptance_by_position,
            "tokens_per_s_plain": self.plain.tokens_per_second,
            "tokens_per_s_spec": self.speculative.tokens_per_second,
            "speedup": self.speedup,
            "median_prompt_speedup": self.median_prompt_speedup,
            "decode_speedup": self.decode_speedup,
            "decode_tokens_per_s_plain": self.plain.decode_tokens_per_second,
            "decode_tokens_per_s_spec": self.speculative.decode_tokens_per_second,
            "prefill_seconds_plain": self.plain.prefill_seconds,
            "prefill_seconds_spec": self.speculative.prefill_seconds,
            "verify_steps": self.verify_steps,
            "tokens_plain": self.plain.tokens,
            "tokens_spec": self.speculative.tokens,
            "seconds_plain": self.plain.seconds,
            "seconds_spec": self.speculative.seconds,
            "decode_ms_per_token_plain": 1e3 * self.plain.seconds_per_forward,
            "verify_ms_per_step": 1e3 * self.speculative.seconds_per_forward,
            "draft_ms_per_step": 1e3 * self.draft_seconds_per_step,
            "verify_cost_ratio": self.verify_cost_ratio,
            "draft_share": self.draft_share,
            "overhead_share": self.overhead_share,
            "graph_capture_seconds_excluded": self.capture_seconds,
        }


def rendered_prompt(tokenizer: PreTrainedTokenizerBase, conversation: Conversation) -> str | None:
    """The conversation's prompt (``prompt_messages``) in the chat template with the
    generation prompt; None when it has no user turn to answer."""
    messages = prompt_messages(conversation)
    if not any(message.role == "user" for message in messages):
        return None
    return render_chat(
        tokenizer,
        [{"role": m.role, "content": m.content} for m in messages],
        add_generation_prompt=True,
        source=conversation.source,
    )


def chat_prompts(
    tokenizer: PreTrainedTokenizerBase, conversations: Sequence[Conversation]
) -> list[list[int]]:
    """Token ids of each conversation's prompt (``prompt_messages``) in the chat template,
    with the generation prompt; conversations with nothing before the answer are skipped."""
    prompts: list[list[int]] = []
    for conversation in conversations:
        text = rendered_prompt(tokenizer, conversation)
        if text is None:
            continue
        # The template writes its own special tokens; the tokenizer must not add a second BOS.
        prompts.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return prompts


def compare(
    decoder: SpeculativeDecoder,
    prompts: Sequence[Sequence[int]],
    *,
    ks: Sequence[int],
    max_new_tokens: int,
    trees: Sequence[TreeShape] = (),
    on_prompt: Callable[[int, list[SpeedupReport]], None] | None = None,
) -> list[SpeedupReport]:
    """Greedy plain decoding and greedy speculative decoding for every K (chains) and every
    tree shape, prompt by prompt; ``on_prompt(done, reports)`` is called after each prompt
    (progress reporting)."""
    if not prompts:
        raise ValueError("no prompts to evaluate")
    reports = [SpeedupReport(k=k, max_new_tokens=max_new_tokens) for k in ks]
    reports += [SpeedupReport(k=tree.depth, max_new_tokens=max_new_tokens, tree=tree) for tree in trees]
    # Warm-up: first calls pay for allocator growth and kernel setup.
    warmup = list(prompts[0])
    decoder.generate_plain(warmup, max_new_tokens=min(8, max_new_tokens))
    for report in reports:
        _speculate(decoder, report, warmup, min(8, max_new_tokens))
    for done, prompt in enumerate(prompts, start=1):
        plain, plain_captures = _without_captures(
            partial(decoder.generate_plain, list(prompt), max_new_tokens=max_new_tokens)
        )
        for report in reports:
            speculative, captures = _without_captures(
                partial(_speculate, decoder, report, list(prompt), max_new_tokens)
            )
            report.add(plain, speculative)
            report.capture_seconds += plain_captures + captures
        if on_prompt is not None:
            on_prompt(done, reports)
    return reports


def _without_captures(generate: Callable[[], GenerationResult]) -> tuple[GenerationResult, float]:
    """``generate()``'s result with the CUDA graph captures it ran taken out of its times, and
    the seconds taken out (0 on a CPU, which captures nothing)."""
    with captures_during() as captured:
        result = generate()
    spent = captured()
    if not spent.seconds:
        return result, 0.0
    trimmed = replace(
        result,
        seconds=result.seconds - spent.seconds,
        target_seconds=result.target_seconds - spent.seconds_of("target"),
        draft_seconds=result.draft_seconds - spent.seconds_of("draft"),
    )
    return trimmed, spent.seconds


def _speculate(
    decoder: SpeculativeDecoder, report: SpeedupReport, prompt: list[int], max_new_tokens: int
) -> GenerationResult:
    return decoder.generate(
        prompt, max_new_tokens=max_new_tokens, num_speculative_tokens=report.k, tree=report.tree
    )


def format_table(reports: Sequence[SpeedupReport]) -> str:
    """A fixed-width table, one row per drafting setting."""
    width = max((len(r.acceptance_by_position) for r in reports), default=0)
    header = (
        f"{'drafting':>13} {'tau':>5} {'plain tok/s':>11} {'spec tok/s':>10} "
        f"{'speedup':>7} {'median':>6} {'decode':>6} {'verify/1':>8} {'draft%':>6} {'same':>7}  "
        "acceptance by position"
    )
    lines = [header, "-" * max(len(header), 75 + 6 * width)]
    for r in reports:
        positions = " ".join(f"{rate:.2f}" for rate in r.acceptance_by_position)
        plain, speculative = r.plain.tokens_per_second, r.speculative.tokens_per_second
        lines.append(
            f"{r.label:>13} {r.tau:>5.2f} {plain:>11.2f} {speculative:>10.2f} "
            f"{r.speedup:>6.2f}x {r.median_prompt_speedup:>5.2f}x {r.decode_speedup:>5.2f}x "
            f"{r.verify_cost_ratio:>8.2f} {100 * r.draft_share:>5.1f}% "
            f"{r.identical_outputs:>3}/{r.prompts:<3}  {positions}"
        )
    return "\n".join(lines)
