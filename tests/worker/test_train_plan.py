"""The trainer's config for a job: knobs, operator overrides and the time budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.eagle_knobs import EagleKnobs
from core.job_errors import JobFailedError
from trainer.config import TrainConfig
from worker.train_plan import build_train_config, training_budget_minutes


def _knobs(**environment: str) -> EagleKnobs:
    return EagleKnobs.from_environment(environment)


def test_without_knob_or_limit_the_trainer_decides() -> None:
    assert training_budget_minutes(_knobs(), seconds_left=None, trained_seconds=0) is None


def test_the_knob_is_the_budget_less_what_earlier_runs_trained() -> None:
    knobs = _knobs(EAGLE_TRAIN_MAX_MINUTES="10")
    assert training_budget_minutes(knobs, seconds_left=None, trained_seconds=0) == 10
    assert training_budget_minutes(knobs, seconds_left=None, trained_seconds=240) == 6


def test_max_runtime_keeps_a_fifth_or_a_minute_for_benchmark_and_publish() -> None:
    knobs = _knobs(EAGLE_TRAIN_MAX_MINUTES="600")
    assert training_budget_minutes(knobs, seconds_left=3600, trained_seconds=0) == 48  # 3600 - 720 s
    assert training_budget_minutes(_knobs(), seconds_left=200, trained_seconds=0) == pytest.approx(140 / 60)


def test_a_runtime_that_leaves_no_training_time_is_an_error() -> None:
    with pytest.raises(JobFailedError, match=r"^MaxRuntimeInSeconds leaves 5 s to train after keeping 60 s"):
        training_budget_minutes(_knobs(), seconds_left=65, trained_seconds=0)


def test_a_spent_knob_budget_still_trains_one_last_moment() -> None:
    knobs = _knobs(EAGLE_TRAIN_MAX_MINUTES="1")
    assert training_budget_minutes(knobs, seconds_left=None, trained_seconds=70) == pytest.approx(10 / 60)


def _config(
    knobs: EagleKnobs, *, head: Path | None = None, overrides: dict[str, object] | None = None
) -> TrainConfig:
    return build_train_config(
        knobs,
        overrides=overrides or {},
        model_dir=Path("/cache/model"),
        data_files=[Path("/cache/data/a.jsonl")],
        run_dir=Path("/work/run"),
        init_head_dir=head,
        budget_minutes=3.0,
    )


def test_knobs_win_over_operator_overrides() -> None:
    config = _config(
        _knobs(
            EAGLE_TTT_STEPS="3",
            EAGLE_LEARNING_RATE="0.001",
            EAGLE_REGENERATE="true",
            EAGLE_DRAFT_VOCAB_SIZE="4096",
        ),
        overrides={"ttt_steps": 7, "batch_tokens": 8192},
    )
    assert config.ttt_steps == 3
    assert config.lr == 0.001
    assert config.regenerate is True
    assert config.draft_vocab_size == 4096
    assert config.batch_tokens == 8192
    assert config.time_budget_minutes == 3.0
    assert config.resume is True


def test_the_workers_process_count_and_device_reach_the_trainer() -> None:
    assert _config(_knobs()).nproc == 1
    assert _config(_knobs()).device == "cpu"
    config = build_train_config(
        _knobs(),
        overrides={"nproc": 4},
        model_dir=Path("/cache/model"),
        data_files=[Path("/cache/data/a.jsonl")],
        run_dir=Path("/work/run"),
        init_head_dir=None,
        budget_minutes=None,
        nproc=2,
        device="auto",
    )
    assert config.nproc == 2
    assert config.device == "auto"
    # The lineage's hyper-parameters are the config's fields, so they record it.
    assert config.model_dump(mode="json")["nproc"] == 2


def test_the_draft_variant_knob_reaches_the_trainer() -> None:
    assert _config(_knobs(EAGLE_VARIANT="peagle")).variant == "peagle"
    assert _config(_knobs(EAGLE_VARIANT="eagle2")).variant == "eagle2"
    # Unset, the trainer picks it from the target's architecture (eagle2 for Qwen3-Next).
    assert _config(_knobs()).variant is None


def test_a_draft_vocabulary_size_cannot_change_an_existing_head() -> None:
    with pytest.raises(JobFailedError) as caught:
        _config(_knobs(EAGLE_DRAFT_VOCAB_SIZE="4096"), head=Path("/cache/head"))
    assert str(caught.value) == (
        "EAGLE_DRAFT_VOCAB_SIZE cannot be used with an existing head (the eagle_model channel): "
        "fine-tuning keeps the head's own draft vocabulary"
    )


def test_an_operator_default_vocabulary_size_yields_to_an_existing_head() -> None:
    config = _config(_knobs(), head=Path("/cache/head"), overrides={"draft_vocab_size": 4096})
    assert config.draft_vocab_size is None


def test_a_bad_operator_override_is_named() -> None:
    with pytest.raises(JobFailedError, match=r"train_overrides.batch_size: Extra inputs are not permitted"):
        _config(_knobs(), overrides={"batch_size": 8})


def test_self_instruct_turns_regeneration_on_unless_the_job_turned_it_off() -> None:
    config = _config(_knobs(EAGLE_SELF_INSTRUCT_CONVERSATIONS="500"))
    assert (config.self_instruct_conversations, config.regenerate) == (500, True)
    with pytest.raises(JobFailedError) as caught:
        _config(_knobs(EAGLE_SELF_INSTRUCT_CONVERSATIONS="500", EAGLE_REGENERATE="false"))
    assert str(caught.value).startswith("EAGLE_SELF_INSTRUCT_CONVERSATIONS needs EAGLE_REGENERATE=true")


@pytest.mark.parametrize("openings", ["none", "tasks_and_chat"])
def test_self_instruct_openings_reach_the_trainer(openings: str) -> None:
    knobs = _knobs(EAGLE_SELF_INSTRUCT_CONVERSATIONS="500", EAGLE_SELF_INSTRUCT_OPENINGS=openings)
    assert _config(knobs).self_instruct_openings == openings


def test_a_job_on_the_built_in_data_gets_the_default_recipes_prompts_for_its_budget() -> None:
    def builtin(knobs: EagleKnobs, budget: float | None = 30.0, **overrides: Any) -> Any:
        return build_train_config(
            knobs,
            overrides=overrides,
            model_dir=Path("/cache/model"),
            data_files=[Path("/cache/data/chitchat.jsonl")],
            run_dir=Path("/work/run"),
            init_head_dir=None,
            budget_minutes=budget,
            builtin_data=True,
        )

    config = builtin(_knobs())
    assert (config.regenerate, config.regenerate_max_new_tokens) == (True, 128)
    assert config.self_instruct_conversations == 1000
    assert builtin(_knobs(), budget=15.0).self_instruct_conversations == 500
    assert builtin(_knobs(EAGLE_SELF_INSTRUCT_CONVERSATIONS="40")).self_instruct_conversations == 40
    # Regeneration turned off, by the job or the operator: no prompts nobody would answer.
    assert builtin(_knobs(EAGLE_REGENERATE="false")).self_instruct_conversations == 0
    assert builtin(_knobs(), regenerate=False).self_instruct_conversations == 0
    # The user's own data: regenerated, with no prompts mixed in.
    assert _config(_knobs()).regenerate is True
    assert _config(_knobs()).self_instruct_conversations == 0
