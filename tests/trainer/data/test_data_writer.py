"""Written ShareGPT JSONL reads back to the same conversations."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from trainer.data import Conversation, Message, load_conversations
from trainer.data.writer import write_conversations_jsonl, write_jsonl


def test_round_trip_through_the_loader(tmp_path: Path) -> None:
    conversations = [
        Conversation(
            [Message("system", "Be brief."), Message("user", "Hi\u2028there"), Message("assistant", "Héllo")],
            "a:1",
        ),
        Conversation([Message("user", "Prompt only")], "b:7"),
    ]
    path = tmp_path / "out" / "data.jsonl"
    digest = write_conversations_jsonl(conversations, path)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    first = json.loads(path.read_text(encoding="utf-8").split("\n")[0])
    assert first == {
        "id": "a:1",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Hi\u2028there"},
            {"from": "gpt", "value": "Héllo"},
        ],
    }
    reread = load_conversations([path]).conversations
    assert [c.messages for c in reread] == [c.messages for c in conversations]
    assert [c.source for c in reread] == [f"{path}:1", f"{path}:2"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["data.jsonl"]


def test_a_failed_write_keeps_the_file_already_there(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, [{"a": 1}])
    with pytest.raises(TypeError):
        write_jsonl(path, [{"a": 2}, {"b": object()}])  # the second row cannot be written
    assert path.read_text(encoding="utf-8") == '{"a": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]
