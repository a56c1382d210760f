"""OpenAI completions: ``{"prompt": "...", "completion": "..."}``.

The prompt becomes the user turn and the completion the assistant turn. TRL's
conversational variant, where both hold lists of chat messages, is read too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.data.errors import RecordSkipped
from trainer.data.formats.common import finish_turns, json_type
from trainer.data.formats.openai_chat import parse_messages
from trainer.data.schema import Message

NAME = "openai-completions"


def matches(record: Mapping[str, Any]) -> bool:
    return "prompt" in record and "completion" in record


def parse(record: Mapping[str, Any]) -> list[Message]:
    prompt, completion = record["prompt"], record["completion"]
    if isinstance(prompt, list) and isinstance(completion, list):
        return finish_turns(parse_messages(prompt, "'prompt'") + parse_messages(completion, "'completion'"))
    if not isinstance(prompt, str):
        raise RecordSkipped(f"'prompt' must be a string, got {json_type(prompt)}")
    if not isinstance(completion, str):
        raise RecordSkipped(f"'completion' must be a string, got {json_type(completion)}")
    return finish_turns([Message(role="user", content=prompt), Message(role="assistant", content=completion)])
