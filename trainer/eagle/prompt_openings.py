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
from collections.abc import Callable, Sequence

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


# The first words of casual conversation: greetings, news, feelings, opinions, plans and the
# small-talk topics (hobbies, food, films, travel, work) every chit-chat corpus is made of. The
# task list's eight "free" and four "conversation" openings give chat under a quarter of the
# prompts; a head trained on them drafts worse on chat than on the tasks (see
# TrainConfig.self_instruct_openings). Generic, like the task list: never taken from an
# evaluation set.
CHAT_OPENINGS: tuple[str, ...] = (
    "Hey, how are you",
    "Good morning!",
    "Hello! I'm",
    "I just got back from",
    "Guess what happened",
    "I'm so tired",
    "I'm feeling",
    "What do you think about",
    "Have you ever",
    "Do you like",
    "My favorite",
    "I've been thinking about",
    "What are you doing this weekend",
    "I love",
    "I can't decide whether",
    "Any plans for",
    "What's your favorite",
    "I watched",
    "I'm planning a trip to",
    "Work has been",
    "My friend",
    "I tried cooking",
    "Do you ever",
    "What kind of music",
)

# Share of prompts that start with a chat opening in "tasks_and_chat".
CHAT_SHARE = 1 / 3


def task_openings() -> list[str]:
    """Every opening of every kind of task, each kind weighted by its number of openings."""
    return [opening for _, openings in TASK_OPENINGS for opening in openings]


def task_and_chat_openings() -> list[str]:
    """The task openings, and the chat openings repeated until they are CHAT_SHARE of the list."""
    tasks = task_openings()
    # chat / (tasks + chat) = CHAT_SHARE, in whole copies of CHAT_OPENINGS.
    copies = max(1, round(CHAT_SHARE * len(tasks) / ((1 - CHAT_SHARE) * len(CHAT_OPENINGS))))
    return [*tasks, *(CHAT_OPENINGS * copies)]


def chat_openings() -> list[str]:
    """The chat openings alone: data for a head whose users mostly chat (the target still writes
    the rest of every prompt and every reply)."""
    return list(CHAT_OPENINGS)


# Each self-instruct mode (TrainConfig.self_instruct_openings) and the openings it draws from.
OPENINGS_BY_MODE: dict[str, Callable[[], list[str]]] = {
    "tasks": task_openings,
    "tasks_and_chat": task_and_chat_openings,
    "chat": chat_openings,
    "none": list,
}


def openings_for(mode: str) -> list[str]:
    """The openings a self-instruct mode draws from (TrainConfig.self_instruct_openings)."""
    if mode not in OPENINGS_BY_MODE:
        raise ValueError(
            f"unknown self-instruct openings {mode!r}: expected one of {', '.join(OPENINGS_BY_MODE)}"
        )
    return OPENINGS_BY_MODE[mode]()


def draw_openings(openings: Sequence[str], count: int, rng: random.Random) -> list[str]:
    """``count`` openings drawn with replacement (an empty ``openings`` gives empty openings)."""
    if not openings:
        return [""] * count
    return [rng.choice(openings) for _ in range(count)]
