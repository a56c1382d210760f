"""OpenAI chat: ``{"messages": [{"role": "user", "content": "..." | [parts]}, ...]}``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainer.data.errors import RecordSkipped
from trainer.data.formats.common import (
    TOOL_ROLES,
    finish_turns,
    require_list,
    require_mapping,
    text_of_content,
)
from trainer.data.schema import Message, Role

NAME = "openai-chat"

CHAT_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}


def matches(record: Mapping[str, Any]) -> bool:
    return "messages" in record


def parse(record: Mapping[str, Any]) -> list[Message]:
    return finish_turns(parse_messages(record["messages"], "'messages'"))


def parse_messages(raw: Any, what: str) -> list[Message]:
    """Chat messages without the shared checks, for formats that embed them (capture, TRL)."""
    items: Sequence[Any] = require_list(raw, what)
    messages: list[Message] = []
    for index, raw_message in enumerate(items, start=1):
        item = require_mapping(raw_message, f"message {index}")
        role_name = item.get("role")
        if not isinstance(role_name, str):
            raise RecordSkipped(f"message {index} has no 'role'")
        if role_name in TOOL_ROLES:
            raise RecordSkipped(f"message {index} has role '{role_name}' (tool turns are not supported)")
        role = CHAT_ROLES.get(role_name)
        if role is None:
            raise RecordSkipped(f"message {index} has unknown role '{role_name}'")
        content = item.get("content")
        if content is None and (item.get("tool_calls") or item.get("function_call")):
            raise RecordSkipped(f"message {index} ({role_name}) is a tool call (not supported)")
        if content is None:
            raise RecordSkipped(f"message {index} ({role_name}) has no 'content'")
        messages.append(
            Message(role=role, content=text_of_content(content, f"message {index} ({role_name})"))
        )
    return messages
