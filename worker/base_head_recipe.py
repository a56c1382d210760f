"""How a base head is trained: the built-in recipe, its budget, and its entry in the store.

Used by the 'base' stage (a job that needs a base head nobody built yet) and by
``eaglenest base-heads build`` (an operator, ahead of time), so both train the same head.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.head_files import HEAD_CONFIG
from core.job_errors import JobFailedError
from db.settings import Settings
from engine.heads.serving_settings import recorded_speculative_tokens, with_serving_settings
from trainer.config import TrainConfig, self_instruct_for_budget
from worker.train_plan import MIN_TRAIN_SECONDS, post_train_reserve

# The built-in data (the catalog's datasets) plus prompts the target writes itself, every reply
# distilled from the target: the trainer's default recipe, kept even where an operator's
# train_overrides (meant for jobs) turn regeneration off.
BASE_RECIPE: dict[str, Any] = {"regenerate": True, "regenerate_max_new_tokens": 128}
# A job that must build its model's base head first gives it at most this share of the time
# MaxRuntimeInSeconds leaves for training; its own head gets the rest.
BASE_SHARE_OF_TRAINING = 0.5


def base_head_config(
    settings: Settings,
    *,
    model_dir: Path,
    data_files: list[Path],
    run_dir: Path,
    budget_minutes: float | None,
) -> TrainConfig:
    """The operator's train_overrides, then the recipe, then base_head_train_overrides."""
    fields: dict[str, Any] = {
        **settings.train_overrides,
        **BASE_RECIPE,
        "self_instruct_conversations": self_instruct_for_budget(budget_minutes),
        **settings.base_head_train_overrides,
        "model_dir": model_dir,
        "data_paths": data_files,
        "out_dir": run_dir,
        "init_head_dir": None,
        "resume": True,
        "time_budget_minutes": budget_minutes,
        "nproc": settings.train_nproc,
        "device": settings.device,
    }
    try:
        return TrainConfig.model_validate(fields)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in detail['loc']) or 'config'}: {detail['msg']}"
            for detail in error.errors()
        )
        raise JobFailedError(
            f"Invalid base head training configuration (EAGLENEST_BASE_HEAD_TRAIN_OVERRIDES): {problems}"
        ) from None


def base_head_budget_seconds(
    settings: Settings, *, seconds_left: float | None, trained_seconds: float
) -> float:
    """Seconds a job may spend training its model's base head; below MIN_TRAIN_SECONDS, none."""
    budget = settings.base_head_train_minutes * 60.0 - trained_seconds
    if seconds_left is not None:
        budget = min(budget, BASE_SHARE_OF_TRAINING * (seconds_left - post_train_reserve(seconds_left)))
    return budget if budget >= MIN_TRAIN_SECONDS else 0.0


def name_the_verifier(head_dir: Path, model_uri: str) -> None:
    """The head's config names the model by its S3 URI, not by the trainer's local cache path."""
    path = head_dir / HEAD_CONFIG
    config = json.loads(path.read_text())
    updated = with_serving_settings(
        config, recorded_speculative_tokens(config), verifier_name_or_path=model_uri
    )
    path.write_text(json.dumps(updated, indent=2) + "\n")
