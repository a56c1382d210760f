"""ShareGPT: ``{"conversations": [{"from": "human", "value": "..."}, ...]}``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.data.errors import RecordSkipped
from trainer.data.formats.common import TOOL_ROLES, finish_turns, require_list, require_mapping
from trainer.data.schema import Conversation, Message, Role

NAME = "sharegpt"

# The speaker names found in the wild: the original ShareGPT dump used human/gpt and
# also chatgpt/bing/bard for other assistants; later exports switched to user/assistant.
SPEAKER_ROLES: dict[str, Role] = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "model": "assistant",
}


def matches(record: Mapping[str, Any]) -> bool:
    return "conversations" in record


def parse(record: Mapping[str, Any]) -> list[Message]:
    turns = require_list(record["conversations"], "'conversations'")
    messages: list[Message] = []
    for index, raw_turn in enumerate(turns, start=1):
        turn = require_mapping(raw_turn, f"turn {index}")
        speaker = turn.get("from", turn.get("role"))
        if not isinstance(speaker, str):
            raise RecordSkipped(f"turn {index} has no 'from' speaker")
        key = speaker.strip().lower()
        if key in TOOL_ROLES:
            raise RecordSkipped(f"turn {index} is from '{speaker}' (tool turns are not supported)")
        role = SPEAKER_ROLES.get(key)
        if role is None:
            known = ", ".join(SPEAKER_ROLES)
            raise RecordSkipped(f"turn {index} has unknown speaker '{speaker}' (known: {known})")
        value = turn.get("value", turn.get("content"))
        if not isinstance(value, str):
            raise RecordSkipped(f"turn {index} ({speaker}) has no string 'value'")
        messages.append(Message(role=role, content=value))
    return finish_turns(messages)


def to_record(conversation: Conversation) -> dict[str, Any]:
    """The ShareGPT record we write: human/gpt speakers, as most training tools expect."""
    speakers = {"system": "system", "user": "human", "assistant": "gpt"}
    return {"conversations": [{"from": speakers[m.role], "value": m.content} for m in conversation.messages]}
