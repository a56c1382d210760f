"""Token ids to text as they are accepted, cut at the first stop string.

Text is re-decoded from all the ids so far (byte-level tokenizers split characters
across tokens, so a token alone may not decode), and held back while it ends in an
incomplete character or in what could be the start of a stop string.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

_INCOMPLETE = "\ufffd"  # what decode gives for a character whose bytes are not all there yet


class TextStream:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, stop: Sequence[str] = ()) -> None:
        bad = [s for s in stop if not s]
        if bad:
            raise ValueError("stop strings must not be empty")
        self._tokenizer = tokenizer
        self._stop = list(stop)
        self._ids: list[int] = []
        self._sent = 0  # characters of the text already handed out
        self.stopped = False  # a stop string was found: the text ends before it

    def add(self, token_ids: Sequence[int]) -> str:
        """New text that is safe to send after these tokens."""
        if self.stopped:
            return ""
        self._ids.extend(token_ids)
        text = self._text()
        cut = self._find_stop(text)
        if cut is not None:
            self.stopped = True
            return self._take(text[:cut])
        if text.endswith(_INCOMPLETE):
            return ""
        return self._take(text[: len(text) - self._held(text)])

    def flush(self) -> str:
        """The rest of the text once generation ended."""
        if self.stopped:
            return ""
        return self._take(self._text())

    def _text(self) -> str:
        return str(self._tokenizer.decode(self._ids, skip_special_tokens=True))

    def _take(self, text: str) -> str:
        new = text[self._sent :]
        self._sent = max(self._sent, len(text))
        return new

    def _find_stop(self, text: str) -> int | None:
        longest = max((len(s) for s in self._stop), default=0)
        start = max(self._sent - longest, 0)  # a match can only end in the unsent part
        found = [i for i in (text.find(s, start) for s in self._stop) if i >= 0]
        return min(found) if found else None

    def _held(self, text: str) -> int:
        """Length of the longest end of ``text`` that begins some stop string."""
        held = 0
        for stop in self._stop:
            for size in range(min(len(stop) - 1, len(text)), held, -1):
                if text.endswith(stop[:size]):
                    held = size
                    break
        return held
