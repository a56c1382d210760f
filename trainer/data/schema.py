"""The one conversation shape every data format is converted into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal["system", "user", "assistant"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class Message:
    """One turn. Content is plain text: multimodal parts are dropped by the readers."""

    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Message.role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise TypeError(f"Message.content must be a str, got {type(self.content).__name__}")


@dataclass(frozen=True, slots=True)
class Conversation:
    """A list of turns plus where it came from (``file:line``) so errors can point back."""

    messages: list[Message]
    source: str = field(default="")

    def as_dicts(self) -> list[dict[str, str]]:
        """The ``[{"role", "content"}]`` list that ``tokenizer.apply_chat_template`` takes."""
        return [{"role": m.role, "content": m.content} for m in self.messages]

    @property
    def has_assistant_turn(self) -> bool:
        return any(m.role == "assistant" for m in self.messages)


def prompt_messages(conversation: Conversation) -> list[Message]:
    """The conversation up to (not including) its last assistant turn, or all of it.

    Evaluation and benchmarks send this to the target and let it answer; the recorded
    answer itself is what the model should reproduce, so it is left out.
    """
    messages = conversation.messages
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            return list(messages[:index])
    return list(messages)
