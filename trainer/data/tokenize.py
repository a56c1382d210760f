"""Tokenise conversations with the target's own chat template and a loss mask on assistant tokens.

The mask covers each assistant turn's content and its end-of-turn token (``<|im_end|>``
for ChatML), never the role header and never the whitespace a template puts after the
end-of-turn token: the model stops at that token, so nothing after it is ever drafted.

Two ways to find those tokens:

1. The template marks assistant text with ``{% generation %}``: transformers returns
   the mask itself (``return_assistant_tokens_mask``), and we trust the template author.
2. Otherwise we render prefixes of the conversation: the text up to turn *i* with the
   generation prompt ends where the assistant's content starts, and the text through
   turn *i* ends (after trailing whitespace is removed) right after its end-of-turn
   token. Those character spans are mapped onto tokens with the tokenizer's offsets.
   Templates that rewrite earlier turns (so a prefix is not a prefix of the full text)
   fall back to finding the turn's content in the full text after the previous turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedTokenizerBase

from trainer.data.schema import Conversation

_GENERATION_BLOCK = re.compile(r"\{%-?\s*generation\s*-?%\}")

Span = tuple[int, int]

# Tokenising takes a few milliseconds per conversation; report about every second.
PROGRESS_EVERY = 200


class ChatTemplateError(ValueError):
    """The chat template cannot render a conversation, or its assistant turns cannot be located."""


@dataclass(frozen=True, slots=True)
class TokenizedConversation:
    input_ids: list[int]
    loss_mask: list[int]
    source: str = ""
    truncated: bool = False

    @property
    def num_masked(self) -> int:
        return sum(self.loss_mask)


class TokenizedConversations(list[TokenizedConversation]):
    """The kept samples, plus counts of what was dropped and why (for the training result)."""

    def __init__(self, items: Iterable[TokenizedConversation] = ()) -> None:
        super().__init__(items)
        self.dropped_no_masked_tokens = 0
        self.dropped_template_errors = 0
        self.truncated = 0
        self.first_error: str | None = None


def uses_generation_blocks(tokenizer: PreTrainedTokenizerBase) -> bool:
    template = tokenizer.chat_template
    return isinstance(template, str) and bool(_GENERATION_BLOCK.search(template))


def tokenize_conversation(
    tokenizer: PreTrainedTokenizerBase, conversation: Conversation, *, max_length: int
) -> TokenizedConversation:
    """Token ids of the rendered conversation and a 0/1 mask over them, cut to ``max_length``."""
    if max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}")
    if not tokenizer.chat_template:
        raise ChatTemplateError(
            f"tokenizer {type(tokenizer).__name__} has no chat template; set tokenizer.chat_template first"
        )
    messages = conversation.as_dicts()
    if uses_generation_blocks(tokenizer):
        input_ids, loss_mask = _tokenize_with_generation_mask(tokenizer, messages, conversation.source)
    else:
        input_ids, loss_mask = _tokenize_with_prefix_spans(
            tokenizer, messages, conversation.source, max_length
        )
    truncated = len(input_ids) > max_length
    return TokenizedConversation(
        input_ids=input_ids[:max_length],
        loss_mask=loss_mask[:max_length],
        source=conversation.source,
        truncated=truncated,
    )


def tokenize_conversations(
    tokenizer: PreTrainedTokenizerBase,
    conversations: Sequence[Conversation],
    *,
    max_length: int,
    progress: Callable[[int, int], None] | None = None,
) -> TokenizedConversations:
    """Tokenise many; drop (and count) those with no masked token or that the template rejects.

    ``progress(done, total)`` is called every ``PROGRESS_EVERY`` conversations and at the end.
    """
    result = TokenizedConversations()
    total = len(conversations)
    for done, conversation in enumerate(conversations, start=1):
        _add_sample(result, tokenizer, conversation, max_length)
        if progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
            progress(done, total)
    return result


def _add_sample(
    result: TokenizedConversations,
    tokenizer: PreTrainedTokenizerBase,
    conversation: Conversation,
    max_length: int,
) -> None:
    try:
        sample = tokenize_conversation(tokenizer, conversation, max_length=max_length)
    except ChatTemplateError as exc:
        result.dropped_template_errors += 1
        result.first_error = result.first_error or str(exc)
        return
    if sample.num_masked == 0:
        result.dropped_no_masked_tokens += 1
        return
    result.truncated += int(sample.truncated)
    result.append(sample)


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[dict[str, str]],
    *,
    add_generation_prompt: bool,
    source: str = "",
) -> str:
    """The chat template's text for these messages (no tokenisation)."""
    try:
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
    except Exception as exc:  # jinja raises its own TemplateError and template-defined exceptions
        where = f"{source}: " if source else ""
        raise ChatTemplateError(f"{where}chat template failed: {exc}") from exc
    if not isinstance(text, str):
        raise ChatTemplateError(f"apply_chat_template returned {type(text).__name__}, expected text")
    return text


def _tokenize_with_generation_mask(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], source: str
) -> tuple[list[int], list[int]]:
    try:
        encoded: Any = tokenizer.apply_chat_template(
            messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
    except Exception as exc:
        raise ChatTemplateError(f"{source}: chat template failed: {exc}") from exc
    return list(encoded["input_ids"]), [int(bit) for bit in encoded["assistant_masks"]]


def _tokenize_with_prefix_spans(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], source: str, max_length: int
) -> tuple[list[int], list[int]]:
    full_text = render_chat(tokenizer, messages, add_generation_prompt=False, source=source)
    try:
        encoded = tokenizer(full_text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    except NotImplementedError as exc:
        raise ValueError(
            f"tokenizer {type(tokenizer).__name__} gives no character offsets; load a fast tokenizer "
            "(AutoTokenizer with use_fast=True) or use a chat template with {% generation %} blocks"
        ) from exc
    input_ids: list[int] = list(encoded["input_ids"])
    offsets: list[tuple[int, int]] = [(int(s), int(e)) for s, e in encoded["offset_mapping"]]
    # Turns that start after the last kept token cannot be trained on; skip rendering them.
    kept_chars = offsets[max_length - 1][1] if len(offsets) > max_length else len(full_text)
    spans = _assistant_spans(tokenizer, messages, full_text, kept_chars, source)
    return input_ids, _mask_from_spans(offsets, spans)


def _assistant_spans(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[dict[str, str]],
    full_text: str,
    kept_chars: int,
    source: str,
) -> list[Span]:
    spans: list[Span] = []
    cursor = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        if cursor >= kept_chars:
            break
        before = _render_or_none(tokenizer, messages[:index], add_generation_prompt=True)
        through = _render_or_none(tokenizer, messages[: index + 1], add_generation_prompt=False)
        span = _span_by_prefix(full_text, before, through, cursor)
        if span is None:
            span = _span_by_search(full_text, message["content"], through, cursor)
        if span is None:
            raise ChatTemplateError(
                f"{source}: cannot locate assistant turn {index + 1} in the chat template's output"
            )
        spans.append(span)
        cursor = span[1]
    return spans


def _render_or_none(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], *, add_generation_prompt: bool
) -> str | None:
    # Some templates refuse a prefix (e.g. one ending on an assistant turn); the
    # content search below copes without it.
    try:
        return render_chat(tokenizer, messages, add_generation_prompt=add_generation_prompt)
    except ChatTemplateError:
        return None


def _span_by_prefix(full_text: str, before: str | None, through: str | None, cursor: int) -> Span | None:
    if before is None or through is None:
        return None
    end_text = through.rstrip()
    if not (through.startswith(before) and full_text.startswith(end_text)):
        return None
    start, end = len(before), len(end_text)
    if start < cursor or end < start:
        return None
    return start, end


def _span_by_search(full_text: str, content: str, through: str | None, cursor: int) -> Span | None:
    # Templates commonly trim content, so search for the trimmed text.
    needle = content.strip()
    start = full_text.find(needle, cursor)
    if start < 0:
        return None
    end = start + len(needle)
    end_of_turn = _end_of_turn_text(through, needle)
    if end_of_turn:
        gap = len(full_text[end:]) - len(full_text[end:].lstrip())
        if full_text.startswith(end_of_turn, end + gap):
            end += gap + len(end_of_turn)
    return start, end


def _end_of_turn_text(through: str | None, needle: str) -> str:
    """What the template writes after an assistant's content (e.g. ``<|im_end|>``)."""
    if through is None:
        return ""
    position = through.rfind(needle)
    if position < 0:
        return ""
    return through[position + len(needle) :].strip()


def _mask_from_spans(offsets: list[tuple[int, int]], spans: list[Span]) -> list[int]:
    """1 for every token that overlaps an assistant span (offsets and spans are both sorted)."""
    mask = [0] * len(offsets)
    span_index = 0
    for token_index, (start, offset_end) in enumerate(offsets):
        # A zero-width token (some special tokens report one) counts as one character wide.
        end = max(offset_end, start + 1)
        while span_index < len(spans) and spans[span_index][1] <= start:
            span_index += 1
        if span_index == len(spans):
            break
        span_start, span_end = spans[span_index]
        if start < span_end and end > span_start:
            mask[token_index] = 1
    return mask


# Marks where the user's text would go, so the template's text is cut exactly there.
_USER_TEXT_MARKER = "\x00eaglenest-user-turn\x00"


def user_turn_prefix(tokenizer: PreTrainedTokenizerBase) -> str:
    """The chat template's text up to where a first user message starts (system prompt included
    when the template adds one by default): how every rendered conversation opens."""
    text = render_chat(
        tokenizer, [{"role": "user", "content": _USER_TEXT_MARKER}], add_generation_prompt=False
    )
    return text[: text.index(_USER_TEXT_MARKER)]
