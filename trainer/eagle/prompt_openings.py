"""Openings of self-instruct prompts: the first words of a user turn, one per kind of task.

Left to itself, a small chat model handed an empty user turn writes mostly one kind of
prompt: SmolLM2's are advice and general questions, with about 8% code and 3% maths. A
head trained on them drafts poorly for anything else. Starting some prompts with the words
a task usually starts with ("Write a Python function that", "Solve for x:") and letting the
target finish them spreads the data over the kinds of task assistant models are asked to
do, while the target still writes every word after the opening and every reply.

The list is generic on purpose -- a task taxonomy like the ones instruction-tuning data sets
are built from -- and never drawn from an evaluation set. Empty openings keep a share of
the model's own, unprompted choices.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

# (kind of task, openings). An empty opening leaves the whole prompt to the model.
TASK_OPENINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("free", ("",) * 8),
    (
        "code",
        (
            "Write a Python function that",
            "Write a Python program to",
            "Write a JavaScript function that",
            "Write a SQL query that",
            "How do I implement",
            "Fix the bug in this Python code:",
            "Write a class in Java that",
            "Write a C++ program that",
        ),
    ),
    (
        "math",
        (
            "Solve for x:",
            "Calculate",
            "What is the probability that",
            "Prove that",
            "Find the value of",
            "A train travels",
            "How many ways can",
            "Simplify the expression",
        ),
    ),
    (
        "reasoning",
        (
            "If all",
            "Which of the following",
            "Three friends",
            "Is the following argument valid?",
        ),
    ),
    (
        "science",
        (
            "Explain how",
            "Why does",
            "What is the difference between",
            "Describe the process of",
        ),
    ),
    (
        "writing",
        (
            "Write a short story about",
            "Write a poem about",
            "Write an email to",
            "Write a product description for",
            "Rewrite the following sentence",
            "Summarize the following text:",
        ),
    ),
    (
        "advice",
        (
            "What are some tips for",
            "How can I improve",
            "Give me a plan to",
            "Can you recommend",
        ),
    ),
    ("knowledge", ("Who was", "What is", "When did", "Tell me about")),
    ("conversation", ("Hi!", "I just", "Let's talk about", "Do you")),
)


def task_openings() -> list[str]:
    """Every opening of every kind of task, each kind weighted by its number of openings."""
    return [opening for _, openings in TASK_OPENINGS for opening in openings]


def draw_openings(openings: Sequence[str], count: int, rng: random.Random) -> list[str]:
    """``count`` openings drawn with replacement (an empty ``openings`` gives empty openings)."""
    if not openings:
        return [""] * count
    return [rng.choice(openings) for _ in range(count)]
