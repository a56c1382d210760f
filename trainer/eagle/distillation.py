"""Distilling a run's conversations chunk by chunk, so that any range of chunks can be distilled
on its own (a worker's shard of a fanned-out job) and give the very records the whole run would.

A chunk is eight generation batches of the shuffled conversations; chunk ``n`` is seeded with
``seed + n`` and is sorted and batched on its own, so its replies depend on nothing outside it.
A shard that starts at a chunk boundary and knows its first chunk number therefore writes,
under greedy decoding, exactly the records one worker would write for the same conversations.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from engine.runner_cache import RunnerCache
from trainer.config import TrainConfig
from trainer.data.loader import load_conversations
from trainer.data.regenerate import regenerate_conversations
from trainer.data.schema import Conversation
from trainer.data.split import content_key, split_holdout
from trainer.data.summary import LoadResult, LoadSummary
from trainer.data.tokenize import ChatTemplateError, TokenizedConversation, render_chat
from trainer.eagle.continuation import ContinuationResult, context_of, continue_conversations
from trainer.eagle.distilled import DistilledRecord, answer_room, origin_of, prompt_room, read_distilled
from trainer.eagle.features import FEATURE_DTYPES, final_dtype_for

CHUNK_BATCHES = 8


def chunk_size(config: TrainConfig, device: torch.device) -> int:
    """Conversations per chunk on ``device``: the unit a shard is made of.

    Eight batches of the rows the device generates at once, so that continuous batching keeps
    its rows full for most of a chunk: rows empty out only as its last conversations finish.
    Sized by CPU rows (48) on a GPU, a chunk of 384 filled its 256 rows one and a half times
    and ran about a quarter of its steps half empty."""
    return CHUNK_BATCHES * config.generation_rows(device)


@dataclass
class Selection:
    """The conversations a run distils (shuffled, not yet distilled by earlier runs, capped),
    what it holds out, and the earlier runs' records it trains on again."""

    loaded: LoadResult
    to_distil: list[Conversation]
    heldout: list[Conversation]
    reused: list[DistilledRecord]
    answered: frozenset[str]
    reused_heldout: int = 0


def select_conversations(config: TrainConfig) -> Selection:
    """The data's conversations in the order this run distils them (seeded: every worker that
    selects for the same config gets the same list)."""
    # No files: self-instruct (TrainConfig refuses a config with neither) writes all the data.
    loaded = load_conversations(config.data_paths) if config.data_paths else LoadResult([], LoadSummary())
    to_distil, heldout = split_holdout(
        loaded.conversations, holdout_fraction=config.holdout_fraction, seed=config.seed
    )
    reused, answered, reused_heldout = _reusable(config, heldout)
    # Shuffled so that a budget-limited regeneration or max_conversations sees every source file.
    random.Random(config.seed).shuffle(to_distil)
    if answered:
        # The budget goes to conversations no earlier run distilled.
        to_distil = [c for c in to_distil if content_key(c) not in answered]
    if config.max_conversations is not None:
        reused = reused[: config.max_conversations]
        to_distil = to_distil[: config.max_conversations - len(reused)]
    return Selection(loaded, to_distil, heldout, reused, answered, reused_heldout)


def _reusable(
    config: TrainConfig, heldout: Sequence[Conversation]
) -> tuple[list[DistilledRecord], frozenset[str], int]:
    """Earlier runs' distilled records this run may train on (none distilled from a conversation
    that this run's split holds out), every origin they answer, and how many were held out."""
    if not config.distilled_paths:
        return [], frozenset(), 0
    distilled = read_distilled(config.distilled_paths)
    held_out = {content_key(c) for c in heldout}
    kept = [r for r in distilled.records if r.origin not in held_out]
    return kept, frozenset(r.origin for r in distilled.records), len(distilled.records) - len(kept)


@dataclass
class DistilledChunks:
    conversations: list[Conversation] = field(default_factory=list)
    # regenerate_turns=last: the exact samples and where each reply starts, per conversation.
    samples: list[TokenizedConversation] = field(default_factory=list)
    reply_from: list[int] = field(default_factory=list)
    generated_tokens: int = 0
    stopped: bool = False
    # Conversations left undistilled: their prompt does not fit the prompt room, no user turn
    # ends it (nothing to answer), or the chat template rejects it.
    unfit: int = 0


def distil_chunks(
    config: TrainConfig,
    generator: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: Iterable[Conversation],
    *,
    first_chunk: int,
    progress: Callable[[int], None],
    should_stop: Callable[[], bool],
    feature_layers: list[int] | None,
    starting: Callable[[int], None] | None = None,
    size: int | None = None,
) -> DistilledChunks:
    """Distil ``conversations``, which start at chunk number ``first_chunk`` of the run.

    ``conversations`` is read a chunk at a time, only once the chunk before is distilled (a
    stream of self-instruct prompts writes each chunk when it is reached). ``progress(done)``
    counts replies written among them, and ``starting(done)`` is said as each chunk begins.
    When ``should_stop()`` turns true the chunks finished so far (and the current one's
    finished conversations) are kept. ``size`` is a plan's chunk size (its shards must chunk as
    it did, whatever their device); by default the generator's device decides it.
    """
    size = size or chunk_size(config, generator.device)
    result = DistilledChunks()
    remaining = iter(conversations)
    # One slot pool (and on a GPU its step graphs) for every chunk, not one a chunk.
    with RunnerCache(generator) as runners:
        start = 0
        for number in itertools.count(first_chunk):
            if should_stop():
                # Stopped if the last chunk was cut short or something is left: a deadline that
                # falls just as the last chunk ends leaves a complete run (a shard's plan counts it
                # done). A stream of prompts checks should_stop() itself: this look ahead writes none.
                result.stopped = result.stopped or next(remaining, None) is not None
                break
            part = list(itertools.islice(remaining, size))
            if not part:
                break
            if starting is not None:
                starting(start)

            def chunk_progress(done: int, _total: int, start: int = start) -> None:
                progress(start + done)

            if config.regenerate_turns == "last":
                continued, unfit = _continue_last_turns(
                    config,
                    generator,
                    tokenizer,
                    part,
                    number,
                    chunk_progress,
                    should_stop,
                    feature_layers,
                    runners,
                )
                result.unfit += unfit
                result.samples.extend(continued.samples)
                result.reply_from.extend(continued.reply_from)
                done, tokens, stopped = continued.conversations, continued.generated_tokens, continued.stopped
            else:
                fitting = regeneration_order(config, tokenizer, part)
                result.unfit += len(part) - len(fitting)
                regenerated = regenerate_conversations(
                    generator,
                    tokenizer,
                    fitting,
                    temperature=config.regenerate_temperature,
                    top_p=config.regenerate_top_p,
                    max_new_tokens=config.regenerate_max_new_tokens,
                    batch_size=config.generation_rows(generator.device),
                    seed=config.seed + number,
                    progress=chunk_progress,
                    should_stop=should_stop,
                )
                done, tokens, stopped = (
                    regenerated.conversations,
                    regenerated.generated_tokens,
                    regenerated.stopped,
                )
            result.conversations.extend(done)
            result.generated_tokens += tokens
            result.stopped = stopped
            start += len(part)
    return result


def distilled_records(
    config: TrainConfig, chunks: DistilledChunks, by_source: dict[str, str]
) -> list[DistilledRecord]:
    """The records ``regenerated.jsonl`` keeps for these chunks (``by_source``: the data
    conversations' origins by source, see ``trainer.eagle.distilled.origins_of``)."""
    last = config.regenerate_turns == "last"
    return [
        DistilledRecord(
            origin=origin_of(conversation, by_source),
            conversation=conversation,
            input_ids=chunks.samples[index].input_ids if last else None,
            reply_from=chunks.reply_from[index] if last else None,
        )
        for index, conversation in enumerate(chunks.conversations)
    ]


def _first_turns(conversation: Conversation, max_turns: int | None) -> Conversation:
    """Cut after the ``max_turns``-th assistant turn (regeneration cost grows with every turn)."""
    if max_turns is None:
        return conversation
    seen = 0
    for index, message in enumerate(conversation.messages):
        if message.role == "assistant":
            seen += 1
            if seen == max_turns:
                return Conversation(messages=conversation.messages[: index + 1], source=conversation.source)
    return conversation


def _prompt_tokens(tokenizer: PreTrainedTokenizerBase, conversation: Conversation) -> int | None:
    """Tokens of the prompt of the first answer to regenerate; None if the template rejects it."""
    messages = conversation.as_dicts()
    first_answer = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    try:
        text = render_chat(tokenizer, messages[:first_answer], add_generation_prompt=True)
    except ChatTemplateError:
        return None
    return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def regeneration_order(
    config: TrainConfig, tokenizer: PreTrainedTokenizerBase, conversations: Sequence[Conversation]
) -> list[Conversation]:
    """One chunk of conversations, ready to regenerate.

    Each conversation is cut to ``regenerate_max_turns`` answers. One whose prompt leaves
    no room for an answer within ``max_length`` is dropped: tokenisation would cut its
    answer off. The rest are sorted by prompt length so that a batch pads little.
    """
    room = answer_room(config)
    measured = []
    for conversation in conversations:
        cut = _first_turns(conversation, config.regenerate_max_turns)
        tokens = _prompt_tokens(tokenizer, cut)
        if tokens is not None and tokens <= room:
            measured.append((tokens, cut))
    return [c for _, c in sorted(measured, key=lambda item: item[0])]


def _continue_last_turns(  # noqa: PLR0917 - private helper of distil_chunks
    config: TrainConfig,
    generator: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: Sequence[Conversation],
    chunk_number: int,
    progress: Callable[[int, int], None],
    should_stop: Callable[[], bool],
    feature_layers: list[int] | None,
    runners: RunnerCache,
) -> tuple[ContinuationResult, int]:
    """One chunk through ``continue_conversations``, shortest prompts first (little padding),
    and how many of its conversations had no context that fits."""
    contexts = [context_of(c, tokenizer, max_prompt_tokens=prompt_room(config)) for c in conversations]
    ordered = sorted((c for c in contexts if c is not None), key=lambda c: len(c.prompt_ids))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed + chunk_number)
        continued = continue_conversations(
            generator,
            tokenizer,
            ordered,
            max_new_tokens=config.regenerate_max_new_tokens,
            batch_size=config.generation_rows(generator.device),
            temperature=config.regenerate_temperature,
            top_p=config.regenerate_top_p,
            should_stop=should_stop,
            progress=lambda done: progress(done, len(ordered)),
            feature_layers=feature_layers,
            feature_dtypes=(FEATURE_DTYPES[config.feature_dtype], final_dtype_for(config.feature_dtype)),
            context_loss=config.context_loss,
            runners=runners,
        )
    return continued, len(conversations) - len(ordered)
