"""A deterministic train / held-out split for honest evaluation."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from trainer.data.schema import Conversation


def content_key(conversation: Conversation) -> str:
    """A hash of the turns alone (not the source), so a record keeps its side wherever it is stored."""
    digest = hashlib.sha256()
    for message in conversation.messages:
        digest.update(message.role.encode())
        digest.update(b"\x00")
        digest.update(message.content.encode("utf-8"))
        digest.update(b"\x01")
    return digest.hexdigest()


def split_holdout(
    conversations: Sequence[Conversation], *, holdout_fraction: float, seed: int
) -> tuple[list[Conversation], list[Conversation]]:
    """Split into (train, heldout), each keeping the input order.

    A record is held out when the hash of (seed, its content) falls below the fraction,
    so the same record is always on the same side for a given seed, whatever else is in
    the data set, and duplicates never straddle the split.
    """
    if not 0.0 <= holdout_fraction <= 1.0:
        raise ValueError(f"holdout_fraction must be between 0 and 1, got {holdout_fraction}")
    threshold = int(holdout_fraction * 2**64)
    train: list[Conversation] = []
    heldout: list[Conversation] = []
    for conversation in conversations:
        digest = hashlib.sha256(f"{seed}:{content_key(conversation)}".encode()).digest()
        bucket = int.from_bytes(digest[:8], "big")
        (heldout if bucket < threshold else train).append(conversation)
    return train, heldout
