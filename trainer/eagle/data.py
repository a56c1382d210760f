"""A run's training samples: load, hold out, (optionally) regenerate, tokenise, split.

The result is written under ``out_dir/prepared/`` so a resumed run trains on exactly
the same samples without regenerating them (regeneration is the slowest stage and,
under a time budget, not repeatable).
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from trainer.config import TrainConfig
from trainer.data.files import expand_data_paths
from trainer.data.formats.sharegpt import to_record
from trainer.data.regenerate import sampling_mode
from trainer.data.schema import Conversation
from trainer.data.split import content_key
from trainer.data.tokenize import (
    TokenizedConversation,
    tokenize_conversations,
)
from trainer.eagle.budget_clock import Clock
from trainer.eagle.continuation import (
    distilled_loss_mask,
    fixed_opening,
)
from trainer.eagle.distillation import distil_chunks, distilled_records, select_conversations
from trainer.eagle.distilled import (
    DistilledRecord,
    origins_of,
    write_distilled,
)
from trainer.eagle.prompt_openings import task_openings
from trainer.eagle.reporting import Stage
from trainer.eagle.self_instruct import synthesize_prompts
from trainer.file_digest import sha256_of

PREPARED_DIR = "prepared"
HELDOUT_FILE = "heldout.jsonl"
REGENERATED_FILE = "regenerated.jsonl"
# Self-instruct samples with its own seed stream: adding it leaves the data's regeneration as it was.
SELF_INSTRUCT_SEED_OFFSET = 7919
# The share of distillation's budget that writing self-instruct prompts may take. Writing a
# prompt cost about half as much as answering it (207 against 100 per CPU-minute, SmolLM2 on 2
# cores), so a third of the budget writes about what the rest answers. The count alone, fixed
# per budget-minute, overshot on a slower, shared machine: a 30 CPU-minute job wrote 1,253
# prompts and had budget left to answer 260 of them.
PROMPT_WRITING_SHARE = 1 / 3

# (stage, done, total) while preparing; the train loop turns it into TrainProgress.
ReportFn = Callable[[Stage, int, int], None]


@dataclass
class DataStats:
    records_read: int = 0
    records_skipped: int = 0
    conversations: int = 0
    conversations_heldout: int = 0
    conversations_used: int = 0
    regeneration_mode: str = "none"
    regeneration_seconds: float = 0.0
    regenerated_conversations: int = 0
    regenerated_tokens: int = 0
    regeneration_stopped: bool = False
    dropped_no_masked_tokens: int = 0
    dropped_template_errors: int = 0
    truncated: int = 0
    train_samples: int = 0
    eval_samples: int = 0
    train_tokens: int = 0
    train_masked_tokens: int = 0
    first_error: str | None = None
    # The self-instruct part of the mix (trainer.eagle.self_instruct): counts and settings.
    self_instruct: dict[str, object] | None = None
    # Conversations distilled by earlier runs (distilled_paths) trained on again, by file name;
    # those held out by this run's split are left out and counted.
    distilled_reused: int = 0
    distilled_reused_by_file: dict[str, int] = field(default_factory=dict)
    distilled_reused_heldout: int = 0


@dataclass
class PreparedData:
    train: list[TokenizedConversation]
    eval: list[TokenizedConversation]
    stats: DataStats = field(default_factory=DataStats)
    stopped: bool = False  # should_stop() fired during preparation


def data_fingerprint(config: TrainConfig) -> str:
    """What decides the samples; a resumed run must match it to reuse prepared/.

    Contents, not paths or times: a worker that downloads the same inputs into a new
    directory for a retried job still resumes. ``distilled_paths`` are left out: they only
    save distilling with the same settings (like a larger budget would), and a resumed job
    whose cache has grown meanwhile must keep the samples its checkpoints were trained on.
    """
    files = [sha256_of(path) for path in expand_data_paths(config.data_paths)] if config.data_paths else []
    model_config = config.model_dir / "config.json"
    model = sha256_of(model_config) if model_config.is_file() else None
    keys = [
        "max_length",
        "max_conversations",
        "holdout_fraction",
        "eval_fraction",
        "max_eval_samples",
        "regenerate",
        "regenerate_turns",
        "regenerate_temperature",
        "regenerate_top_p",
        "regenerate_max_new_tokens",
        "regenerate_max_turns",
        "regenerate_max_prompt_tokens",
        "self_instruct_conversations",
        "self_instruct_temperature",
        "self_instruct_top_p",
        "self_instruct_max_prompt_tokens",
        "self_instruct_openings",
        "distilled_elsewhere",
        "seed",
    ]
    payload = {"model": model, "files": files, **{k: getattr(config, k) for k in keys}}
    if config.context_loss:  # only when on, so a fingerprint without it stays what it was before
        payload["context_loss"] = True
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    temporary.replace(path)


def _read_samples(path: Path) -> list[TokenizedConversation]:
    samples = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            samples.append(TokenizedConversation(row["input_ids"], row["loss_mask"], row.get("source", "")))
    return samples


def save_prepared(out_dir: Path, data: PreparedData, fingerprint: str) -> None:
    directory = out_dir / PREPARED_DIR
    directory.mkdir(parents=True, exist_ok=True)
    for name, samples in (("train", data.train), ("eval", data.eval)):
        _write_jsonl(
            directory / f"{name}.jsonl",
            [{"input_ids": s.input_ids, "loss_mask": s.loss_mask, "source": s.source} for s in samples],
        )
    summary = {"fingerprint": fingerprint, "stats": asdict(data.stats)}
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def load_prepared(out_dir: Path, fingerprint: str) -> PreparedData | None:
    """The saved samples, or None when absent; a different fingerprint is an error (another run's data)."""
    directory = out_dir / PREPARED_DIR
    summary_path = directory / "summary.json"
    if not summary_path.is_file():
        return None
    summary = json.loads(summary_path.read_text())
    if summary.get("fingerprint") != fingerprint:
        raise ValueError(
            f"{directory}: prepared data of a run with different data settings; "
            "use another out_dir or resume=false to start over"
        )
    return PreparedData(
        train=_read_samples(directory / "train.jsonl"),
        eval=_read_samples(directory / "eval.jsonl"),
        stats=DataStats(**summary["stats"]),
    )


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

    def stop_regenerating() -> bool:
        return should_stop() or (deadline is not None and clock() >= deadline)

    generator = generation_copy(target, bf16=bf16)
    stats.regeneration_mode = sampling_mode(config.regenerate_temperature, config.regenerate_top_p)
    started = clock()
    if config.self_instruct_conversations:
        write_until = None if deadline is None else started + PROMPT_WRITING_SHARE * (deadline - started)

        def stop_writing() -> bool:
            return stop_regenerating() or (write_until is not None and clock() >= write_until)

        conversations = with_self_instruct(
            config, generator, tokenizer, conversations, stats, report, stop_writing, answered
        )
    # Said now: the first batch's progress comes only once it is generated, a minute or more.
    report("regenerating", 0, len(conversations))
    # Chunks of eight batches, in the shuffled order: a budget-limited run draws evenly from
    # the whole data set, and prompts are measured (rendered, tokenised) only as needed.
    chunks = distil_chunks(
        config,
        generator,
        tokenizer,
        conversations,
        first_chunk=0,
        progress=lambda done: report("regenerating", done, len(conversations)),
        should_stop=stop_regenerating,
        feature_layers=feature_layers,
    )
    stats.regenerated_tokens = chunks.generated_tokens
    stats.regeneration_stopped = chunks.stopped
    stats.regeneration_seconds = clock() - started
    stats.regenerated_conversations = len(chunks.conversations)
    last = config.regenerate_turns == "last"
    records = distilled_records(config, chunks, by_source)
    return _Distillation(chunks.conversations, chunks.samples if last else None, records)


def generation_copy(target: PreTrainedModel, *, bf16: bool) -> PreTrainedModel:
    """The model distillation generates with.

    Generation is dominated by reading the weights once per token: a bfloat16 copy halves
    that traffic and multiplies with native bf16 kernels (about 1.5-2x faster here). The
    teacher signal is still computed from the float32 weights afterwards.
    """
    return copy.deepcopy(target).to(torch.bfloat16) if bf16 else target  # type: ignore[arg-type]


def with_self_instruct(  # noqa: PLR0917 - also the planner of a fanned-out distillation
    config: TrainConfig,
    generator: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: list[Conversation],
    stats: DataStats,
    report: ReportFn,
    should_stop: Callable[[], bool],
    answered: frozenset[str],
) -> list[Conversation]:
    """The target's own prompts, then the data's conversations: the distillation order.

    Prompts first because writing them was already paid from the budget: shuffled in with a
    large data set, a budget-limited run answered only its share of them (a 30 CPU-minute job
    on the built-in chit-chat, 7168 conversations, distilled 1436 of the 8168, so about 180 of
    the 1000 prompts it had spent minutes writing), and they are the broad data that carries
    over to unlike prompts.

    The prompts' seed moves on with the number of ``answered`` origins: a run after others
    on the same distillation cache writes new prompts rather than those they answered."""
    report("writing_prompts", 0, config.self_instruct_conversations)
    seed = config.seed + SELF_INSTRUCT_SEED_OFFSET + len(answered)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        synthesized = synthesize_prompts(
            generator,
            tokenizer,
            config.self_instruct_conversations,
            temperature=config.self_instruct_temperature,
            top_p=config.self_instruct_top_p,
            max_prompt_tokens=config.self_instruct_max_prompt_tokens,
            batch_size=config.generation_rows(generator.device),
            openings=task_openings() if config.self_instruct_openings == "tasks" else (),
            should_stop=should_stop,
            progress=lambda kept: report("writing_prompts", kept, config.self_instruct_conversations),
        )
    fresh = [c for c in synthesized.conversations if content_key(c) not in answered]
    if len(fresh) < len(synthesized.conversations):
        synthesized.dropped["already_distilled"] += len(synthesized.conversations) - len(fresh)
        synthesized.conversations = fresh
    stats.self_instruct = synthesized.summary(
        temperature=config.self_instruct_temperature,
        top_p=config.self_instruct_top_p,
        max_prompt_tokens=config.self_instruct_max_prompt_tokens,
        openings=config.self_instruct_openings,
    )
    return [*synthesized.conversations, *conversations]


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
    _write_jsonl(config.out_dir / HELDOUT_FILE, [to_record(c) for c in selection.heldout])
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
