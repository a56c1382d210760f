"""When each token of a generation became available: the engine with a clock on its output.

A serving engine streams tokens as they are decided. The batch-1 decoder decides them in
chunks (one token per plain decode step, accepted drafts plus one per verification), and
every chunk passes through ``SequenceState.emit``; timing that call gives exactly what a
streaming client would see, without touching the decoding itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from trainer.engine.decoder import SpeculativeDecoder
from trainer.engine.result import GenerationResult
from trainer.engine.sequence import SequenceState


@dataclass(frozen=True, slots=True)
class Chunk:
    seconds: float  # since the request started
    tokens: int


@dataclass(slots=True)
class TimedGeneration:
    result: GenerationResult
    prompt_tokens: int
    seconds: float  # whole request, start to last token
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def output_tokens(self) -> int:
        return sum(chunk.tokens for chunk in self.chunks)


class _TimedSequence(SequenceState):
    """Records the time and size of every chunk of tokens the decoder emits."""

    def __init__(self, prompt_ids: list[int], *, max_new_tokens: int, eos_token_ids: frozenset[int]) -> None:
        super().__init__(prompt_ids, max_new_tokens=max_new_tokens, eos_token_ids=eos_token_ids)
        self.started = time.perf_counter()
        self.chunks: list[Chunk] = []

    def emit(self, token_ids: Iterable[int]) -> None:
        before = len(self.new_token_ids)
        super().emit(token_ids)
        added = len(self.new_token_ids) - before
        if added:
            self.chunks.append(Chunk(time.perf_counter() - self.started, added))


class TimedDecoder(SpeculativeDecoder):
    """The engine's decoder, unchanged, whose sequences keep per-chunk timestamps."""

    _last_sequence: _TimedSequence | None = None

    def _sequence(self, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int) -> SequenceState:
        plain = super()._sequence(prompt_ids, max_new_tokens)
        sequence = _TimedSequence(
            plain.prompt_ids, max_new_tokens=plain.max_new_tokens, eos_token_ids=plain.eos_token_ids
        )
        self._last_sequence = sequence
        return sequence

    def timed(self, prompt_ids: Sequence[int], *, max_new_tokens: int, speculate: bool) -> TimedGeneration:
        """Greedy decoding of one request, speculative (with the head) or plain."""
        if speculate:
            result = self.generate(list(prompt_ids), max_new_tokens=max_new_tokens)
        else:
            result = self.generate_plain(list(prompt_ids), max_new_tokens=max_new_tokens)
        sequence = self._last_sequence
        if sequence is None:
            raise RuntimeError("the decoder produced no sequence")
        self._last_sequence = None
        chunks = sequence.chunks
        return TimedGeneration(
            result=result,
            prompt_tokens=len(sequence.prompt_ids),
            seconds=chunks[-1].seconds if chunks else 0.0,
            chunks=chunks,
        )
