"""Small chat data sets for training tests (shared with tests/trainer/test_train.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path


def write_chat_data(path: Path, *, conversations: int, seed: int = 0) -> Path:
    """ShareGPT records of short, patterned question/answer pairs (learnable, not trivial)."""
    rng = random.Random(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "ran", "to", "see", "the", "dog"]
    words += ["who", "was", "very", "happy", "today"]
    with path.open("w", encoding="utf-8") as handle:
        for index in range(conversations):
            question = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8)))
            answer = " ".join(words[(index + k) % len(words)] for k in range(rng.randint(5, 20)))
            turns = [{"from": "human", "value": question}, {"from": "gpt", "value": answer}]
            handle.write(json.dumps({"conversations": turns}) + "\n")
    return path
