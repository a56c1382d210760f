"""The record formats we read, in the order a record is tested against them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainer.data.formats import capture, completions, openai_chat, sharegpt
from trainer.data.schema import Message


@dataclass(frozen=True, slots=True)
class RecordFormat:
    name: str
    matches: Callable[[Mapping[str, Any]], bool]
    parse: Callable[[Mapping[str, Any]], list[Message]]


# Capture lines first: their request bodies may hold "messages" or "prompt" keys,
# but only after unwrapping, so the outer "captureData" key is the telling one.
FORMATS: tuple[RecordFormat, ...] = (
    RecordFormat(capture.NAME, capture.matches, capture.parse),
    RecordFormat(sharegpt.NAME, sharegpt.matches, sharegpt.parse),
    RecordFormat(openai_chat.NAME, openai_chat.matches, openai_chat.parse),
    RecordFormat(completions.NAME, completions.matches, completions.parse),
)

SIGNATURES = "'captureData', 'conversations', 'messages', or 'prompt' with 'completion'"


def format_of(record: Mapping[str, Any]) -> RecordFormat | None:
    for record_format in FORMATS:
        if record_format.matches(record):
            return record_format
    return None
