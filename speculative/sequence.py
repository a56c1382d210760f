"""Per-request decoding state: the tokens so far and when to stop."""

from __future__ import annotations

from collections.abc import Iterable

from speculative.result import FinishReason


class SequenceState:
    """Tokens of one request; ``emit`` never goes past EOS or ``max_new_tokens``."""

    def __init__(self, prompt_ids: list[int], *, max_new_tokens: int, eos_token_ids: frozenset[int]) -> None:
        if not prompt_ids:
            raise ValueError("prompt_ids is empty: the target needs at least one prompt token")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        self.prompt_ids = prompt_ids
        self.max_new_tokens = max_new_tokens
        self.eos_token_ids = eos_token_ids
        self.new_token_ids: list[int] = []
        self.finish_reason: FinishReason | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def remaining(self) -> int:
        return self.max_new_tokens - len(self.new_token_ids)

    def tokens_in(self, start: int, stop: int) -> list[int]:
        """Tokens at absolute positions ``start..stop-1`` of prompt + output."""
        prompt_length = len(self.prompt_ids)
        if stop <= prompt_length:
            return self.prompt_ids[start:stop]
        head = self.prompt_ids[start:] if start < prompt_length else []
        return head + self.new_token_ids[max(start - prompt_length, 0) : stop - prompt_length]

    @property
    def last_token(self) -> int:
        return self.new_token_ids[-1] if self.new_token_ids else self.prompt_ids[-1]

    def emit(self, token_ids: Iterable[int]) -> None:
        """Append tokens in order, stopping after an EOS token or at the length limit."""
        for token in token_ids:
            if self.finished:
                return
            self.new_token_ids.append(token)
            if token in self.eos_token_ids:
                self.finish_reason = "eos"
            elif len(self.new_token_ids) >= self.max_new_tokens:
                self.finish_reason = "length"
