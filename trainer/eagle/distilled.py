"""Conversations the target already distilled, as records a later run can train on again.

Each line of a run's ``regenerated.jsonl`` is a ShareGPT record (any tool reads it as data)
plus what a later run needs to train on it without asking the target again:

- ``origin``: the content key of the conversation it was distilled from (a data record or a
  self-instruct prompt), so that a later run skips that conversation instead of distilling
  it twice, and leaves the record out when that conversation is held out in its own split;
- with ``regenerate_turns=last``, ``input_ids`` and ``reply_from``: the exact tokens of
  context and reply (decoding and re-tokenising can split text differently) and where the
  target's reply starts.

Light on purpose (no torch): the worker keys its distillation cache on
``generation_settings`` before the trainer loads anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config import TrainConfig
from trainer.data.formats.sharegpt import SPEAKER_ROLES, to_record
from trainer.data.schema import Conversation, Message, prompt_messages
from trainer.data.split import content_key
from trainer.data.writer import write_jsonl

# Bumped when a record's meaning changes, so that old and new records never share a cache key.
RECORD_FORMAT = 1


@dataclass(frozen=True)
class DistilledRecord:
    origin: str
    conversation: Conversation  # the context and the target's replies
    input_ids: list[int] | None = None  # regenerate_turns=last: context + reply (+ stop token)
    reply_from: int | None = None  # regenerate_turns=last: the first reply position in input_ids

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {**to_record(self.conversation), "origin": self.origin}
        if self.input_ids is not None:
            row.update(input_ids=self.input_ids, reply_from=self.reply_from)
        return row

    @classmethod
    def from_json(cls, row: Any, *, source: str) -> DistilledRecord:
        """One record; ValueError naming ``source`` when it is not one this module wrote."""
        if not isinstance(row, dict) or not isinstance(row.get("origin"), str):
            raise ValueError(f"{source}: not a distilled record (no 'origin')")
        conversation = Conversation(messages=_messages(row.get("conversations"), source), source=source)
        input_ids, reply_from = row.get("input_ids"), row.get("reply_from")
        if input_ids is not None and not (
            isinstance(input_ids, list)
            and all(isinstance(i, int) for i in input_ids)
            and isinstance(reply_from, int)
            and 0 < reply_from <= len(input_ids)
        ):
            raise ValueError(f"{source}: 'input_ids'/'reply_from' are not token ids and a reply start")
        return cls(
            origin=row["origin"], conversation=conversation, input_ids=input_ids, reply_from=reply_from
        )


def _messages(turns: Any, source: str) -> list[Message]:
    """The turns exactly as written (not through the data readers, whose rules would drop,
    say, an empty reply the target did write)."""
    if not isinstance(turns, list) or not turns:
        raise ValueError(f"{source}: 'conversations' is not a list of turns")
    messages = []
    for turn in turns:
        role = SPEAKER_ROLES.get(turn.get("from", "")) if isinstance(turn, dict) else None
        if role is None or not isinstance(turn.get("value"), str):
            raise ValueError(f"{source}: a turn is not {{'from': speaker, 'value': text}}: {turn!r:.80}")
        messages.append(Message(role=role, content=turn["value"]))
    return messages


@dataclass
class DistilledSet:
    """The records of several files, each origin once (concurrent writers may both have
    distilled the same conversation: the first file in order wins)."""

    records: list[DistilledRecord]
    by_file: dict[str, int]  # file name -> records taken from it


def read_distilled(paths: Sequence[Path]) -> DistilledSet:
    records: dict[str, DistilledRecord] = {}
    by_file: dict[str, int] = {}
    for path in sorted(paths, key=lambda p: p.name):
        taken = 0
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{where}: not JSON ({error})") from error
                record = DistilledRecord.from_json(row, source=where)
                if record.origin not in records:
                    records[record.origin] = record
                    taken += 1
        by_file[path.name] = taken
    return DistilledSet(records=list(records.values()), by_file=by_file)


def origins_of(conversations: Iterable[Conversation]) -> dict[str, str]:
    """Data conversations' origins by their ``file:line`` source (unique within one load)."""
    return {conversation.source: content_key(conversation) for conversation in conversations}


def origin_of(distilled: Conversation, by_source: dict[str, str]) -> str:
    """Where a distilled conversation came from: its data record, found by source, or else
    (a self-instruct prompt, whose source is shared) the prompt it answers, which distillation
    leaves as it was."""
    found = by_source.get(distilled.source)
    if found is not None:
        return found
    return content_key(Conversation(messages=prompt_messages(distilled)))


def answer_room(config: TrainConfig) -> int:
    """Prompt tokens that leave room for a full reply within max_length (at least half of it)."""
    return max(config.max_length - config.regenerate_max_new_tokens, config.max_length // 2)


def prompt_room(config: TrainConfig) -> int:
    """The longest prompt distillation hands the target: cut to it from the front
    (regenerate_turns=last), or the conversation is left out when longer (all)."""
    if config.regenerate_turns == "last":
        return min(config.regenerate_max_prompt_tokens, answer_room(config))
    return answer_room(config)


def generation_settings(config: TrainConfig) -> dict[str, Any]:
    """Every setting that changes what distillation writes for a given target and data.

    Left out on purpose: the budget, max_conversations and the splits (they choose which
    conversations are distilled, not what the replies are; held-out ones are filtered when
    reading), the seed (a sampled reply under another seed is as much the target's as any),
    context_loss (it changes loss masks, rebuilt when reading), and batch size and generation
    precision (numerics only).
    """
    last = config.regenerate_turns == "last"
    settings: dict[str, Any] = {
        "record_format": RECORD_FORMAT,
        "regenerate_turns": config.regenerate_turns,
        "temperature": config.regenerate_temperature,
        # Top-p changes nothing when greedy: keep such keys together.
        "top_p": config.regenerate_top_p if config.regenerate_temperature > 0 else None,
        "max_new_tokens": config.regenerate_max_new_tokens,
        # The context the target sees: cut to this many tokens (last), or dropped when longer (all).
        "prompt_room": prompt_room(config),
        "max_turns": None if last else config.regenerate_max_turns,
    }
    if config.self_instruct_conversations:
        settings["self_instruct"] = {
            "temperature": config.self_instruct_temperature,
            "top_p": config.self_instruct_top_p,
            "max_prompt_tokens": config.self_instruct_max_prompt_tokens,
        }
        if config.self_instruct_openings != "none":
            # Only when set, so that caches written before openings existed keep their keys.
            settings["self_instruct"]["openings"] = config.self_instruct_openings
    return settings


def write_distilled(path: Path, records: Sequence[DistilledRecord]) -> None:
    write_jsonl(path, (record.to_json() for record in records))
