"""A run's prepared samples and their cache on disk (``prepared/`` in the run directory).

Preparing samples can mean hours of distillation, so they are saved once and a resumed run
(or another rank of a data-parallel one) loads them, provided the settings that decide them,
its fingerprint, are the same.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainer.config import TrainConfig
from trainer.data.files import expand_data_paths
from trainer.data.tokenize import TokenizedConversation
from trainer.data.writer import write_jsonl
from trainer.file_digest import sha256_of

PREPARED_DIR = "prepared"


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
    # Left undistilled: no context within the prompt room, no user turn to answer, or a prompt
    # the chat template rejects.
    dropped_unfit_prompts: int = 0
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


def read_samples(path: Path) -> list[TokenizedConversation]:
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
        write_jsonl(
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
        train=read_samples(directory / "train.jsonl"),
        eval=read_samples(directory / "eval.jsonl"),
        stats=DataStats(**summary["stats"]),
    )
