"""Protocol data for trainer-vs-speculators, written under ``<bench dir>/data/``.

    .venv/bin/python benchmarks/trainer_vs_speculators/make_data.py [--bench-dir DIR] [--model DIR]

* ``train.jsonl`` / ``heldout.jsonl``: the built-in chit-chat chats that hold at least one
  reply, split by a hash of their id (1 in 20 held out), so the split never depends on order.
* ``train_tokens.jsonl``: token ids + loss masks of the training chats from eaglenest's own
  tokenizer path (``load_conversations`` + ``tokenize_conversation``, 512 tokens), so both
  trainers see the same tokens: speculators trains on these rows as they are.
* ``eval40.jsonl``: 40 single-turn prompts unlike the training data (20 HumanEval + 20 CHAMP).
* ``chat40.jsonl``: 40 held-out chats, at most 4 turns each, ending on a reply.

The built-in datasets are written to ``<bench dir>/builtin/`` first (as ``python -m trainer
prepare-data`` does) when they are not there yet.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from trainer.data.builtin import prepare_builtin
from trainer.data.loader import load_conversations
from trainer.data.tokenize import tokenize_conversation

REPO = Path(__file__).resolve().parents[2]
BUILTIN_NAMES = ("champ", "chitchat", "humaneval")
HELDOUT_ONE_IN = 20  # sha256(id) % 20 == 0 goes to the held-out side
MAX_LENGTH = 512  # as the trainer runs (ours.sh --max-length) and speculators' --total-seq-len
PROMPTS_PER_SET = 20
PROMPT_SEED = 0
CHATS = 40
CHAT_TURNS = 4
CHAT_SEED = 0

Row = dict[str, Any]


def read_jsonl(path: Path) -> list[Row]:
    with path.open() as file:
        return [json.loads(line) for line in file]


def write_jsonl(rows: Iterable[Row], path: Path) -> None:
    with path.open("w") as file:
        for row in rows:
            file.write(json.dumps(row) + "\n")


def has_reply(row: Row) -> bool:
    # 3,151 chit-chat chats hold only the first person's lines: nothing to supervise.
    return any(turn["from"] == "gpt" for turn in row["conversations"])


def is_held_out(row: Row) -> bool:
    return int(hashlib.sha256(row["id"].encode()).hexdigest(), 16) % HELDOUT_ONE_IN == 0


def single_turn_prompts(path: Path, count: int, seed: int) -> list[Row]:
    """``count`` rows picked by a seeded shuffle: the first user turn and an empty reply slot.

    The placeholder reply ("x") only marks where the assistant answers; eval generates it.
    """
    rows = read_jsonl(path)
    random.Random(seed).shuffle(rows)
    prompts = []
    for row in rows[:count]:
        user = next(turn for turn in row["conversations"] if turn["from"] == "human")
        prompts.append({"id": row["id"], "conversations": [user, {"from": "gpt", "value": "x"}]})
    return prompts


def chat_prompts(heldout: list[Row], count: int, seed: int) -> list[Row]:
    """``count`` held-out chats by a seeded shuffle, cut to their first turns and ending on a reply.

    Trailing user turns are dropped because eval scores the last assistant turn's slot.
    """
    rows = list(heldout)
    random.Random(seed).shuffle(rows)
    chats = []
    for row in rows[:count]:
        turns = row["conversations"][:CHAT_TURNS]
        while turns and turns[-1]["from"] != "gpt":
            turns = turns[:-1]
        chats.append({"id": row["id"], "conversations": turns})
    return chats


def tokenize_training_rows(model: Path, train_path: Path, out_path: Path) -> tuple[int, int]:
    """Write ids + masks of each chat with a supervised token; return (rows, masked tokens)."""
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    loaded = load_conversations([train_path])
    rows = masked = 0
    with out_path.open("w") as file:
        for conversation in loaded.conversations:
            sample = tokenize_conversation(tokenizer, conversation, max_length=MAX_LENGTH)
            if sample.num_masked == 0:
                continue
            file.write(json.dumps({"input_ids": sample.input_ids, "loss_mask": sample.loss_mask}) + "\n")
            rows += 1
            masked += sample.num_masked
    return rows, masked


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bench-dir", type=Path, default=REPO / ".cache/peer-speculators")
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    args = parser.parse_args()

    builtin = args.bench_dir / "builtin"
    data = args.bench_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    if not all((builtin / f"{name}.jsonl").is_file() for name in BUILTIN_NAMES):
        for entry in prepare_builtin(BUILTIN_NAMES, builtin):
            print(f"{builtin / entry.file}: {entry.records} records (sha256 {entry.sha256})")

    with_replies = [row for row in read_jsonl(builtin / "chitchat.jsonl") if has_reply(row)]
    train = [row for row in with_replies if not is_held_out(row)]
    heldout = [row for row in with_replies if is_held_out(row)]
    print("with replies", len(with_replies), "train", len(train), "heldout", len(heldout))
    write_jsonl(train, data / "train.jsonl")
    write_jsonl(heldout, data / "heldout.jsonl")

    unlike = single_turn_prompts(builtin / "humaneval.jsonl", PROMPTS_PER_SET, PROMPT_SEED)
    unlike += single_turn_prompts(builtin / "champ.jsonl", PROMPTS_PER_SET, PROMPT_SEED)
    write_jsonl(unlike, data / "eval40.jsonl")
    write_jsonl(chat_prompts(heldout, CHATS, CHAT_SEED), data / "chat40.jsonl")

    rows, masked = tokenize_training_rows(args.model, data / "train.jsonl", data / "train_tokens.jsonl")
    print("tokenized", rows, "masked tokens", masked)


if __name__ == "__main__":
    main()
