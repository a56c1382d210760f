"""Checks every format shares once its turns are pulled out of the record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainer.data.errors import RecordSkipped
from trainer.data.schema import Message, Role

# Turns produced by tools or function calls have no place in a plain chat template.
TOOL_ROLES = frozenset(
    {"tool", "function", "function_call", "tool_call", "tool_response", "ipython", "observation"}
)

# Text-carrying parts of OpenAI content lists (Chat Completions and Responses APIs).
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def require_mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RecordSkipped(f"{what} must be a JSON object, got {json_type(value)}")
    return value


def require_list(value: Any, what: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise RecordSkipped(f"{what} must be a list, got {json_type(value)}")
    return value


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def text_of_content(content: Any, what: str) -> str:
    """A message's text: a plain string, or the text parts of a content list joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        other_types: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") in TEXT_PART_TYPES:
                text = part.get("text")
                if not isinstance(text, str):
                    raise RecordSkipped(f"{what} has a text part whose 'text' is {json_type(text)}")
                texts.append(text)
            else:
                part_type = part.get("type") if isinstance(part, Mapping) else json_type(part)
                other_types.append(str(part_type))
        if not texts:
            kinds = ", ".join(sorted(set(other_types))) or "none"
            raise RecordSkipped(f"{what} has no text parts (non-text parts: {kinds})")
        return "\n".join(texts)
    raise RecordSkipped(f"{what} content must be a string or a list of parts, got {json_type(content)}")


def finish_turns(turns: list[Message]) -> list[Message]:
    """Apply the rules all formats share to the extracted turns.

    A trailing empty assistant turn is dropped (a request still waiting for its reply);
    any other empty turn makes the record unusable, because dropping it would silently
    glue its neighbours together.
    """
    if turns and turns[-1].role == "assistant" and not turns[-1].content.strip():
        turns = turns[:-1]
    for index, turn in enumerate(turns, start=1):
        if not turn.content.strip():
            raise RecordSkipped(f"turn {index} ({turn.role}) is empty")
    if not any(turn.role != "system" for turn in turns):
        raise RecordSkipped("no user or assistant turn")
    return turns


def message(role: Role, content: str) -> Message:
    return Message(role=role, content=content)
