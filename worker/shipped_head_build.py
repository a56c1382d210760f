"""Build a head to ship with eaglenest (``eaglenest base-heads ship``), from scratch, locally.

The same recipe and trainer as a job's base head (worker.base_head_recipe, ``trainer.train``):
the built-in datasets plus self-instruct prompts with task openings, every reply distilled from
the target, in the given budget. The head is exported in bf16 into ``--out`` with a manifest
that says how to rebuild it and what it is: the recipe (every TrainConfig field), the data and
its sha256s, the budget and the hardware, the draft vocabulary's coverage, τ and speedup on
prompts unlike its data (``python -m trainer eval`` on chit-chat openers), the sha256 of the
target's files it was trained for and of each of its own (worker.shipped_heads checks them).
With ``continue_build`` it starts from the head already in ``--out`` and its replies instead
(worker.shipped_head_chain), so sessions add their budgets up.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from core.head_files import HEAD_FILES
from db.settings import Settings
from trainer.config import TrainConfig
from trainer.data.builtin import prepare_builtin
from trainer.eagle.data import REGENERATED_FILE
from trainer.eagle.reporting import TrainResult, progress_printer
from trainer.file_digest import sha256_of
from trainer.train import train
from worker.base_head_recipe import base_head_config, name_the_verifier
from worker.code_version import code_version
from worker.shipped_head_chain import Continuation, prepare_continuation, save_distilled, total_minutes
from worker.shipped_head_eval import EVAL_DATASET, EvalSettings, evaluate_head
from worker.shipped_heads import MANIFEST, checkout_relative, model_fingerprint

Say = Callable[[str], None]


@dataclass(frozen=True)
class ShipOptions:
    model_dir: Path
    out_dir: Path
    work_dir: Path
    minutes: float
    datasets: tuple[str, ...] = ("humaneval", "champ")
    evaluation: EvalSettings = field(default_factory=EvalSettings)  # the device: the build's
    hardware_note: str = ""
    command: str = ""  # the command line that built it, for the manifest
    overrides: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields over the recipe
    continue_build: bool = False  # start from the head in out_dir and its distilled replies


def ship_base_head(settings: Settings, options: ShipOptions, say: Say = print) -> dict[str, Any]:
    """Train, export, evaluate and describe the head; return its manifest (also written last)."""
    # The code that builds the head is the checkout as it is now: a build takes an hour or more,
    # and commits made meanwhile are not what ran.
    version = code_version()
    data_dir = options.work_dir / "data"
    entries = prepare_builtin(options.datasets, data_dir)
    continuation = prepare_continuation(options.out_dir, options.work_dir) if options.continue_build else None
    extra = continuation.train_overrides() if continuation is not None else {}
    config = ship_config(settings, options, [data_dir / entry.file for entry in entries], extra)
    start = f"from the head in {options.out_dir}" if continuation is not None else "from scratch"
    say(f"Training the head of {options.model_dir} {start} ({options.minutes:g} min) in {config.out_dir}")
    result = train(config, progress_printer(say))
    if result.files.head_dir is None:
        raise RuntimeError("the training run stopped before exporting a head")
    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    for name in HEAD_FILES:
        shutil.copyfile(Path(result.files.head_dir) / name, out / name)
    distilled = save_distilled(out, _distilled_parts(continuation, config.out_dir / REGENERATED_FILE))
    chain = continuation.chain() if continuation is not None else []
    name_the_verifier(out, options.model_dir.name)
    # Measured on the device the head trained on (a GPU build: `base-heads evaluate --write`
    # measures it again on a CPU afterwards).
    measured_as = replace(options.evaluation, device=config.device)
    say(f"Evaluating {out} on {measured_as.prompts} {EVAL_DATASET} openers ({config.device})")
    evaluation = evaluate_head(options.model_dir, out, options.work_dir / "eval", measured_as)
    manifest = {
        "name": out.name,
        "format": "EAGLE-3 native head (config.json + model.safetensors), bfloat16",
        "rebuild": checkout_relative(options.command),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code_version": version,
        "target": {"name": options.model_dir.name, "files": model_fingerprint(options.model_dir)},
        "recipe": _recipe(result, options),
        "data": {
            "datasets": [
                {key: getattr(entry, key) for key in ("name", "file", "records", "sha256", "source_package")}
                | {"source_version": entry.source_version}
                for entry in entries
            ],
            "summary": result.data.model_dump(mode="json"),
            "distilled": distilled,
        },
        "chain": chain,
        "budget": {
            "minutes": options.minutes,
            "total_minutes": total_minutes(chain, options.minutes),
            "clock": config.budget_clock,
            **result.timing.model_dump(mode="json", exclude={"budget_clock"}),
        },
        "hardware": _hardware(config, options.hardware_note),
        "training": result.training.model_dump(mode="json"),
        "heldout": result.evaluation.model_dump(mode="json"),
        "draft_vocab": {
            "size": result.head.draft_vocab_size,
            "coverage_of_training_tokens": result.head.draft_vocab_coverage,
        },
        "evaluation": evaluation,
        "files": {name: sha256_of(out / name) for name in HEAD_FILES},
    }
    # Written last: a folder without a manifest is a build that did not finish.
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _distilled_parts(continuation: Continuation | None, this_run: Path) -> list[Path]:
    """The replies the head was trained on: the earlier builds' first, then this build's."""
    earlier = [continuation.distilled] if continuation is not None and continuation.distilled else []
    return [*earlier, *([this_run] if this_run.is_file() else [])]


def ship_config(
    settings: Settings, options: ShipOptions, data_files: list[Path], continuation: dict[str, Any]
) -> TrainConfig:
    recipe = base_head_config(
        settings,
        model_dir=options.model_dir,
        data_files=data_files,
        run_dir=options.work_dir / "run",
        budget_minutes=options.minutes,
    )
    # bf16 halves the file (and is what a GPU serves); the budget is wall time on this machine.
    # Only the fields the recipe set: a field left to its default keeps its device-dependent
    # meaning (regenerate_batch_size: 256 rows on a GPU unless a config names its own).
    fields = (
        recipe.model_dump(exclude_unset=True)
        | {"export_dtype": "bfloat16", "budget_clock": "wall"}
        | continuation
        | options.overrides
    )
    return TrainConfig.model_validate(fields)


def _recipe(result: TrainResult, options: ShipOptions) -> dict[str, Any]:
    """Every TrainConfig field, local paths as the names they stand for."""
    recipe = dict(result.hyperparameters)
    recipe["model_dir"] = options.model_dir.name
    recipe["data_paths"] = [Path(path).name for path in recipe.get("data_paths", [])]
    recipe["distilled_paths"] = [Path(path).name for path in recipe.get("distilled_paths", [])]
    if recipe.get("init_head_dir"):
        recipe["init_head_dir"] = Path(recipe["init_head_dir"]).name
    recipe["out_dir"] = None
    return recipe


def _hardware(config: TrainConfig, note: str) -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": config.device,
        "num_threads": config.num_threads,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "note": note or None,
    }
