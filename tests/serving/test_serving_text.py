"""Streaming detokenisation: whole characters only, cut before a stop string."""

from __future__ import annotations

from serving.text import TextStream
from trainer.models.tiny import build_tiny_tokenizer


def byte_ids(text: str) -> list[int]:
    return list(build_tiny_tokenizer().encode(text, add_special_tokens=False))


def test_pieces_add_up_and_never_split_a_character() -> None:
    ids = byte_ids("héllo wörld")  # é and ö are two bytes, two tokens each
    stream = TextStream(build_tiny_tokenizer())
    pieces = [stream.add([token]) for token in ids]
    assert "".join(pieces) + stream.flush() == "héllo wörld"
    assert all("\ufffd" not in piece for piece in pieces)


def test_stop_string_across_tokens_is_cut_and_never_sent() -> None:
    stream = TextStream(build_tiny_tokenizer(), stop=["END"])
    pieces = [stream.add([token]) for token in byte_ids("abcENDdef")]
    assert "".join(pieces) == "abc"
    assert stream.stopped
    assert stream.flush() == ""


def test_a_false_start_of_a_stop_string_is_released() -> None:
    stream = TextStream(build_tiny_tokenizer(), stop=["ENDX"])
    sent = "".join(stream.add([token]) for token in byte_ids("aEND b"))
    assert sent + stream.flush() == "aEND b"
    assert not stream.stopped
