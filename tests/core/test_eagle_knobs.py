"""The EAGLE_* knobs of OptimizationEnvironment."""

from __future__ import annotations

import pytest

from core.eagle_knobs import EagleKnobError, EagleKnobs


def test_parses_every_knob_and_ignores_other_keys() -> None:
    knobs = EagleKnobs.from_environment(
        {
            "EAGLE_TRAIN_MAX_MINUTES": "90.5",
            "EAGLE_NUM_SPECULATIVE_TOKENS": "5",
            "EAGLE_DRAFT_VOCAB_SIZE": "32000",
            "EAGLE_REGENERATE": "True",
            "EAGLE_VARIANT": "eagle3",
            "EAGLE_TTT_STEPS": "7",
            "EAGLE_LEARNING_RATE": "3e-4",
            "EAGLE_SELF_INSTRUCT_CONVERSATIONS": "2000",
            "EAGLE_SELF_INSTRUCT_OPENINGS": "tasks",
            "OPTION_TENSOR_PARALLEL_DEGREE": "8",
        }
    )
    assert knobs == EagleKnobs(
        train_max_minutes=90.5,
        num_speculative_tokens=5,
        draft_vocab_size=32000,
        regenerate=True,
        variant="eagle3",
        ttt_steps=7,
        learning_rate=3e-4,
        self_instruct_conversations=2000,
        self_instruct_openings="tasks",
    )
    assert EagleKnobs.from_environment(None) == EagleKnobs()


def test_peagle_is_a_draft_variant() -> None:
    assert EagleKnobs.from_environment({"EAGLE_VARIANT": "peagle"}).variant == "peagle"


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("EAGLE_TRAIN_MAX_MINUTES", "0", "positive number of minutes"),
        ("EAGLE_TRAIN_MAX_MINUTES", "inf", "positive number of minutes"),
        ("EAGLE_NUM_SPECULATIVE_TOKENS", "17", "integer between 1 and 16"),
        ("EAGLE_NUM_SPECULATIVE_TOKENS", "2.5", "integer between 1 and 16"),
        ("EAGLE_DRAFT_VOCAB_SIZE", "255", "integer between 256 and 262144"),
        ("EAGLE_REGENERATE", "yes", "true or false"),
        ("EAGLE_VARIANT", "medusa", "enum value set: [eagle3, eagle2, peagle]"),
        ("EAGLE_TTT_STEPS", "11", "integer between 1 and 10"),
        ("EAGLE_LEARNING_RATE", "-1e-3", "positive number"),
        ("EAGLE_SELF_INSTRUCT_CONVERSATIONS", "many", "integer between 0 and 100000"),
        ("EAGLE_SELF_INSTRUCT_CONVERSATIONS", "100001", "integer between 0 and 100000"),
        ("EAGLE_SELF_INSTRUCT_OPENINGS", "code", "enum value set: [tasks, tasks_and_chat, chat, none]"),
        ("EAGLE_BATCH", "4", "Unknown EAGLE_ key; supported keys: EAGLE_DRAFT_VOCAB_SIZE"),
    ],
)
def test_rejects_each_malformed_knob_by_name(key: str, value: str, why: str) -> None:
    with pytest.raises(EagleKnobError) as raised:
        EagleKnobs.from_environment({key: value, "EAGLE_TTT_STEPS" if key != "EAGLE_TTT_STEPS" else "X": "3"})
    problems = [problem for problem in raised.value.problems if problem[0] == key]
    assert problems, raised.value.problems
    assert problems[0][1] == value
    assert why in problems[0][2]
