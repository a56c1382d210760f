"""A run's training samples: load, hold out, (optionally) regenerate, tokenise, split.

The result is written under ``out_dir/prepared/`` (trainer.eagle.prepared) so a resumed run
trains on exactly the same samples without regenerating them (regeneration is the slowest
stage and, under a time budget, not repeatable).
"""

from __future__ import annotations

import copy
import itertools
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from trainer.config import TrainConfig
from trainer.data.formats.sharegpt import to_record
from trainer.data.regenerate import sampling_mode
from trainer.data.schema import Conversation
from trainer.data.tokenize import (
    TokenizedConversation,
    tokenize_conversations,
)
from trainer.data.writer import write_jsonl
from trainer.eagle.budget_clock import Clock
from trainer.eagle.context_loss import distilled_loss_mask, fixed_opening
from trainer.eagle.distillation import distil_chunks, distilled_records, select_conversations
from trainer.eagle.distilled import (
    DistilledRecord,
    origins_of,
    write_distilled,
)
from trainer.eagle.prepared import DataStats, PreparedData
from trainer.eagle.prompt_stream import PromptStream
from trainer.eagle.reporting import Stage

HELDOUT_FILE = "heldout.jsonl"
REGENERATED_FILE = "regenerated.jsonl"

# (stage, done, total) while preparing; the train loop turns it into TrainProgress.
ReportFn = Callable[[Stage, int, int], None]


@dataclass
class _Distillation:
    conversations: list[Conversation]
    # With regenerate_turns=last, their exact token samples (loss on the target's reply
    # only); None asks the caller to tokenise the conversations.
    samples: list[TokenizedConversation] | None
    records: list[DistilledRecord]  # the same conversations, as regenerated.jsonl keeps them


def _regenerate(  # noqa: PLR0917 - private, called once with everything it needs
    config: TrainConfig,
    target: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: list[Conversation],
    stats: DataStats,
    report: ReportFn,
    should_stop: Callable[[], bool],
    deadline: float | None,
    bf16: bool,
    clock: Clock,
    feature_layers: list[int] | None,
    answered: frozenset[str],
) -> _Distillation:
    """The target's replies to ``conversations`` (and to its own prompts with self-instruct,
    none of them one of the ``answered`` origins that earlier runs distilled)."""
    by_source = origins_of(conversations)
    # How far each stage got (its latest progress report). A budget ends a stage only once it
    # has made something: a budget too small for one batch on a slow or loaded machine still
    # writes and answers the first batch, rather than leaving training no sample at all.
    # should_stop() (a stop the user asked for) ends a stage at once, whatever it has made.
    done: dict[Stage, int] = {}
    latest: list[Stage] = []  # the stage of the latest report

    def tracked(stage: Stage, count: int, total: int) -> None:
        done[stage] = count
        latest[:] = [stage]
        report(stage, count, total)

    def over(stage: Stage, until: float | None) -> bool:
        return until is not None and clock() >= until and done.get(stage, 0) > 0

    def stop_regenerating() -> bool:
        return should_stop() or over("regenerating", deadline)

    generator = generation_copy(target, bf16=bf16)
    stats.regeneration_mode = sampling_mode(config.regenerate_temperature, config.regenerate_top_p)
    started = clock()
    stream: Iterable[Conversation] = conversations
    prompts: PromptStream | None = None
    if config.self_instruct_conversations:
        # Written a chunk at a time as distillation reaches them (trainer.eagle.prompt_stream),
        # then the data's conversations: the prompts were paid for, so they are answered first.
        prompts = PromptStream(
            config,
            generator,
            tokenizer,
            answered,
            tracked,
            lambda: should_stop() or over("writing_prompts", deadline),
        )
        stream = itertools.chain(prompts, conversations)
    # The conversations this run means to distil (every prompt asked for, then the data's).
    planned = config.self_instruct_conversations + len(conversations)

    def chunk_starting(count: int) -> None:
        # Said as a chunk starts after prompts were written for it: its first progress comes
        # only once a batch is generated, a minute or more.
        if latest != ["regenerating"]:
            tracked("regenerating", count, planned)

    # Chunks of eight batches, in the shuffled order: a budget-limited run draws evenly from
    # the whole data set, and prompts are measured (rendered, tokenised) only as needed.
    chunks = distil_chunks(
        config,
        generator,
        tokenizer,
        stream,
        first_chunk=0,
        progress=lambda count: tracked("regenerating", count, planned),
        should_stop=stop_regenerating,
        feature_layers=feature_layers,
        starting=chunk_starting,
    )
    if prompts is not None:
        stats.self_instruct = prompts.summary()
    stats.regenerated_tokens = chunks.generated_tokens
    stats.regeneration_stopped = chunks.stopped
    stats.regeneration_seconds = clock() - started
    stats.regenerated_conversations = len(chunks.conversations)
    stats.dropped_unfit_prompts = chunks.unfit
    last = config.regenerate_turns == "last"
    records = distilled_records(config, chunks, by_source)
    return _Distillation(chunks.conversations, chunks.samples if last else None, records)


def generation_copy(target: PreTrainedModel, *, bf16: bool) -> PreTrainedModel:
    """The model distillation generates with.

    Generation is dominated by reading the weights once per token: a bfloat16 copy halves
    that traffic and multiplies with native bf16 kernels (about 1.5-2x faster here). The
    teacher signal is still computed from the float32 weights afterwards.

    Each parameter is converted on its own and the copy is built around the converted ones, so
    the copy adds half the float32 target's memory at its peak: copying the model whole and
    then converting it held a second float32 target on the device first, twice the copy's
    size. Tied parameters (SmolLM2's embeddings and LM head) stay one.
    """
    if not bf16:
        return target
    converted: dict[int, object] = {
        id(parameter): torch.nn.Parameter(
            parameter.detach().to(torch.bfloat16), requires_grad=parameter.requires_grad
        )
        for parameter in target.parameters()
        if parameter.is_floating_point()
    }
    generator: PreTrainedModel = copy.deepcopy(target, converted)
    torch.nn.Module.to(generator, torch.bfloat16)  # buffers (RoPE frequencies) as before
    return generator


def with_self_instruct(  # noqa: PLR0917 - the planner of a fanned-out distillation
    config: TrainConfig,
    generator: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: list[Conversation],
    stats: DataStats,
    report: ReportFn,
    should_stop: Callable[[], bool],
    answered: frozenset[str],
) -> list[Conversation]:
    """Every self-instruct prompt, written now, then the data's conversations: the order a
    single run distils them in (it writes the same prompts as it reaches them).

    Prompts first because writing them was already paid from the budget: shuffled in with a
    large data set, a budget-limited run answered only its share of them (a 30 CPU-minute job
    on the built-in chit-chat, 7168 conversations, distilled 1436 of the 8168, so about 180 of
    the 1000 prompts it had spent minutes writing), and they are the broad data that carries
    over to unlike prompts."""
    prompts = PromptStream(config, generator, tokenizer, answered, report, should_stop)
    written = list(prompts)
    stats.self_instruct = prompts.summary()
    return [*written, *conversations]


def prepare_data(
    config: TrainConfig,
    target: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    report: ReportFn,
    should_stop: Callable[[], bool],
    regenerate_deadline: float | None,
    regenerate_bf16: bool = False,
    clock: Clock = time.monotonic,
    feature_layers: list[int] | None = None,
) -> PreparedData:
    """Samples for training and evaluation; held-out conversations go to ``heldout.jsonl``.

    With ``feature_layers`` (the head's aux layer ids), samples distilled with
    ``regenerate_turns=last`` carry the target features recorded while generating them.
    Conversations distilled by earlier runs (``distilled_paths``) are trained on as they are,
    and the data's conversations they answer are not distilled again.
    """
    stats = DataStats()
    report("loading_data", 0, len(config.data_paths))
    selection = select_conversations(config)
    stats.records_read = selection.loaded.summary.records_read
    stats.records_skipped = selection.loaded.summary.records_skipped
    stats.conversations = len(selection.loaded.conversations)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(config.out_dir / HELDOUT_FILE, [to_record(c) for c in selection.heldout])
    stats.conversations_heldout = len(selection.heldout)
    stats.distilled_reused_heldout = selection.reused_heldout
    train_conversations, reused, answered = selection.to_distil, selection.reused, selection.answered
    stats.distilled_reused = len(reused)
    stats.distilled_reused_by_file = dict(Counter(_file_name(r.conversation.source) for r in reused))
    stopped = False
    regenerated_samples: list[TokenizedConversation] | None = None
    if config.regenerate and config.distilled_elsewhere:
        # Every reply was written before this run (a fanned-out job's shards, in distilled_paths):
        # the data's conversations they did not answer are left out, as a stopped distillation's are.
        train_conversations, regenerated_samples = [], [] if config.regenerate_turns == "last" else None
        write_distilled(config.out_dir / REGENERATED_FILE, [])
    elif config.regenerate:
        distillation = _regenerate(
            config,
            target,
            tokenizer,
            train_conversations,
            stats,
            report,
            should_stop,
            regenerate_deadline,
            regenerate_bf16,
            clock,
            feature_layers,
            answered,
        )
        train_conversations, regenerated_samples = distillation.conversations, distillation.samples
        # Only what this run distilled: a distillation cache adds it to what it reused.
        write_distilled(config.out_dir / REGENERATED_FILE, distillation.records)
        stopped = should_stop()
    stats.conversations_used = len(train_conversations) + len(reused)
    report("tokenizing", 0, stats.conversations_used)
    if regenerated_samples is not None:
        generated = [*regenerated_samples, *_reused_samples(config, tokenizer, reused)]
        ordered = [s for s in generated if s.num_masked > 0]
        stats.dropped_no_masked_tokens = len(generated) - len(ordered)
    else:
        samples = tokenize_conversations(
            tokenizer, [*train_conversations, *(r.conversation for r in reused)], max_length=config.max_length
        )
        stats.dropped_no_masked_tokens = samples.dropped_no_masked_tokens
        stats.dropped_template_errors = samples.dropped_template_errors
        stats.truncated = samples.truncated
        stats.first_error = samples.first_error
        ordered = _with_context_loss(samples, tokenizer) if config.context_loss else list(samples)
    random.Random(config.seed + 1).shuffle(ordered)
    eval_count = int(len(ordered) * config.eval_fraction)
    if config.eval_fraction > 0 and len(ordered) >= 4:
        eval_count = min(max(eval_count, 1), config.max_eval_samples)
    eval_samples, train_samples = ordered[:eval_count], ordered[eval_count:]
    stats.train_samples, stats.eval_samples = len(train_samples), len(eval_samples)
    stats.train_tokens = sum(len(s.input_ids) for s in train_samples)
    stats.train_masked_tokens = sum(s.num_masked for s in train_samples)
    return PreparedData(train=train_samples, eval=eval_samples, stats=stats, stopped=stopped)


def _with_context_loss(
    samples: Sequence[TokenizedConversation], tokenizer: PreTrainedTokenizerBase
) -> list[TokenizedConversation]:
    """Data trained on as written (no regeneration): the loss covers every position past the
    template's opening, the other speaker's turns too. The teacher at each position is the
    target's own distribution from the same feature pass, so the extra positions cost no
    target time."""
    opening = fixed_opening(tokenizer)
    return [
        TokenizedConversation(
            sample.input_ids,
            distilled_loss_mask(sample.input_ids, 0, opening),
            sample.source,
            sample.truncated,
        )
        for sample in samples
    ]


def _reused_samples(
    config: TrainConfig, tokenizer: PreTrainedTokenizerBase, records: Sequence[DistilledRecord]
) -> list[TokenizedConversation]:
    """Reused records labelled as this run labels its own distillation with
    regenerate_turns=last: loss on the reply (and on the context with context_loss), over the
    exact tokens the target produced; a record without them is tokenised like any conversation
    (loss on its assistant turns)."""
    opening = fixed_opening(tokenizer) if config.context_loss else None
    samples: list[TokenizedConversation] = []
    without_ids: list[Conversation] = []
    for record in records:
        if record.input_ids is None or record.reply_from is None:
            without_ids.append(record.conversation)
            continue
        prompt, reply = record.input_ids[: record.reply_from], record.input_ids[record.reply_from :]
        mask = distilled_loss_mask(prompt, len(reply), opening)
        samples.append(TokenizedConversation(record.input_ids, mask, record.conversation.source))
    samples.extend(tokenize_conversations(tokenizer, without_ids, max_length=config.max_length))
    return samples


def _file_name(source: str) -> str:
    """The file of a ``path:line`` source."""
    return Path(source.rsplit(":", 1)[0]).name
