"""Self-instruct: the target writes user prompts as well as the replies (the Magpie recipe).

An instruction-tuned model handed its chat template up to the start of a user turn writes
a plausible user message, because that is what followed such a prefix in its tuning data.
Sampled with some temperature, these prompts cover what the model was tuned to answer --
far broader than one downloaded dataset -- and cost no data at all. Each kept prompt
becomes a conversation with a single user turn; distillation then has the target answer it
(greedily, or as configured) like any other conversation.

Prompts that are empty, cut at the length cap, repeated, or looping are dropped: each
would teach the head a reply to a prompt no user sends. Good prompts written beyond the
count asked for are counted as dropped too ("surplus"), so the counts always add up.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from engine.generation import batching_supported, generate_batched
from engine.runner_cache import RunnerCache
from engine.sampling import SamplingParams
from trainer.data.schema import Conversation, Message
from trainer.eagle.context_loss import fixed_opening
from trainer.eagle.continuation import generate_replies, stop_token_ids
from trainer.eagle.prompt_openings import draw_openings

SOURCE = "self-instruct"
MIN_WORDS = 3
# A word 4-gram seen this often in one prompt means the sampler is looping.
LOOP_NGRAM, LOOP_REPEATS = 4, 3
# Give up after this many prompts generated per prompt asked for (a model that mostly loops).
MAX_ATTEMPTS_PER_PROMPT = 4
FINISH_FRACTION = 0.9
CHUNK_BATCHES = 4


@dataclass
class SelfInstructResult:
    conversations: list[Conversation]  # one user turn each, no reply yet
    generated: int = 0
    tokens: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> count
    stopped: bool = False
    opened: int = 0  # kept prompts that began with a task opening

    def add(self, other: SelfInstructResult) -> None:
        """Count ``other``'s prompts and drops in this result (a run writes in rounds)."""
        self.conversations.extend(other.conversations)
        self.generated += other.generated
        self.tokens += other.tokens
        self.dropped.update(other.dropped)
        self.stopped = self.stopped or other.stopped
        self.opened += other.opened

    def summary(
        self, *, temperature: float, top_p: float, max_prompt_tokens: int, openings: str
    ) -> dict[str, object]:
        """What lineage records of the mix: counts and the generation settings."""
        return {
            "source": SOURCE,
            "kept": len(self.conversations),
            "generated": self.generated,
            "dropped": dict(self.dropped),
            "tokens": self.tokens,
            "temperature": temperature,
            "top_p": top_p,
            "max_prompt_tokens": max_prompt_tokens,
            "openings": openings,
            "kept_with_opening": self.opened,
        }


def drop_reason(text: str, *, cut: bool, seen: set[str], opening: str = "") -> str | None:
    """Why a generated prompt is not kept, or None to keep it (and remember it in ``seen``).

    ``text`` starts with ``opening``; the target must have written at least a word of its own
    after it ("Write a Python function that" alone asks for nothing)."""
    if cut:
        return "truncated"
    words = text.split()
    if len(words) < MIN_WORDS or len(words) <= len(opening.split()):
        return "empty"
    key = " ".join(word.lower() for word in words)
    if key in seen:
        return "duplicate"
    grams = Counter(tuple(words[i : i + LOOP_NGRAM]) for i in range(len(words) - LOOP_NGRAM + 1))
    if grams and max(grams.values()) >= LOOP_REPEATS:
        return "looping"
    if re.search(r"(.)\1{15,}", text):
        return "looping"
    seen.add(key)
    return None


def synthesize_prompts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    count: int,
    *,
    temperature: float = 1.0,
    top_p: float = 0.95,
    max_prompt_tokens: int = 64,
    batch_size: int = 48,
    openings: Sequence[str] = (),
    should_stop: Callable[[], bool] = lambda: False,
    progress: Callable[[int], None] = lambda kept: None,
    seen: set[str] | None = None,
    runners: RunnerCache | None = None,
) -> SelfInstructResult:
    """Up to ``count`` distinct user prompts written by ``model`` (sampled: the caller seeds torch).

    With ``openings`` (trainer.eagle.prompt_openings), each prompt starts with one drawn at
    random and the target writes the rest. ``seen`` holds the prompts (lowercased words) of
    earlier calls of the same run, which count as duplicates; it grows with the kept ones.
    ``runners`` keeps continuous batching's slot pool (and CUDA graphs) over rounds and calls."""
    if temperature <= 0:
        raise ValueError("self-instruct prompts must be sampled: temperature > 0 (greedy writes one prompt)")
    prefix = fixed_opening(tokenizer)
    # Drawn from torch's generator, so the caller's seed decides the openings too (only when
    # there are openings: without them the prompts stay those of earlier versions' seeds).
    rng = random.Random(int(torch.randint(0, 2**62, ()))) if openings else random.Random(0)
    # Each opening's tokens, encoded once rather than for every row that draws it.
    ids_of = {opening: _opening_ids(tokenizer, opening) for opening in {"", *openings}}
    stop_ids = stop_token_ids(model, tokenizer)
    result = SelfInstructResult(conversations=[])
    seen = set() if seen is None else seen
    was_training = model.training
    model.train(False)
    try:
        while len(result.conversations) < count and result.generated < count * MAX_ATTEMPTS_PER_PROMPT:
            if should_stop():
                result.stopped = True
                break
            # About a fifth of written prompts are dropped (mostly truncated): ask for a little more
            # than is missing, in chunks of a few batches so progress keeps coming.
            rows = min(CHUNK_BATCHES * batch_size, math.ceil(1.25 * (count - len(result.conversations))))
            row_openings = draw_openings(openings, rows, rng)
            opening_ids = [ids_of[opening] for opening in row_openings]
            replies = _write_prompts(
                model,
                prefix,
                opening_ids,
                stop_ids,
                max_prompt_tokens,
                batch_size,
                SamplingParams(temperature, top_p),
                should_stop,
                runners,
            )
            for opening, first_ids, reply in zip(row_openings, opening_ids, replies, strict=False):
                if reply is None:
                    continue
                tokens, stop_token = reply
                result.generated += 1
                result.tokens += len(tokens) + (stop_token is not None)
                text = str(tokenizer.decode(first_ids + tokens, skip_special_tokens=True)).strip()
                reason = drop_reason(text, cut=stop_token is None, seen=seen, opening=opening)
                if reason is None and len(result.conversations) >= count:
                    # The chunk asks for a little more than is missing; good prompts beyond
                    # ``count`` are counted too, so that generated = kept + dropped.
                    reason = "surplus"
                if reason is not None:
                    result.dropped[reason] += 1
                else:
                    message = Message(role="user", content=text)
                    result.conversations.append(Conversation(messages=[message], source=SOURCE))
                    result.opened += bool(opening)
            progress(len(result.conversations))
    finally:
        model.train(was_training)
    return result


def _opening_ids(tokenizer: PreTrainedTokenizerBase, opening: str) -> list[int]:
    return list(tokenizer.encode(opening, add_special_tokens=False)) if opening else []


def _write_prompts(  # noqa: PLR0917 - private helper of synthesize_prompts
    model: PreTrainedModel,
    prefix: list[int],
    opening_ids: list[list[int]],
    stop_ids: list[int],
    max_prompt_tokens: int,
    batch_size: int,
    sampling: SamplingParams,
    should_stop: Callable[[], bool],
    runners: RunnerCache | None,
) -> list[tuple[list[int], int | None] | None]:
    """One sampled continuation of ``prefix`` + each row's opening, in row order: (tokens,
    stop token or None when cut), or None for a row never started because of a stop."""
    contexts = [prefix + first for first in opening_ids]
    if batching_supported(model):
        # Continuous batching on the engine's slot pool: a prompt that ends frees its row at
        # once, so nobody waits for the batch's runaway rows (dropped as truncated anyway).
        replies, _ = generate_batched(
            model,
            contexts,
            stop_ids=stop_ids,
            max_new_tokens=max_prompt_tokens,
            batch_size=batch_size,
            sampling=sampling,
            should_stop=should_stop,
            # Every row starts with the template's opening: run it once (a row without a task
            # opening keeps its last token, which picks the row's first sample).
            shared_prefix=prefix[:-1],
            runners=runners,
        )
        return [None if r is None else (r.tokens, r.stop_token) for r in replies]
    rows = contexts[:batch_size]
    generated = generate_replies(
        model,
        rows,
        stop_ids=stop_ids,
        pad_id=stop_ids[0],
        max_new_tokens=max_prompt_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        # The last tenth of a batch are mostly runaway prompts that would be dropped as
        # truncated anyway; waiting for them would cost most of the batch's time.
        finish_fraction=FINISH_FRACTION,
    )
    return [(tokens, stop_token) for tokens, stop_token, _ in generated]
