"""Comparing batched generation's replies with the exact path's."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.replies import Reply


def assert_same_replies_and_features(exact: Sequence[Reply | None], batched: Sequence[Reply | None]) -> None:
    """Every reply's tokens equal, and its recorded features too, up to the last bits (another
    batch shape sums in another order)."""
    for expected, reply in zip(exact, batched, strict=True):
        assert expected is not None
        assert reply is not None
        assert expected.features is not None
        assert reply.features is not None
        assert reply.tokens == expected.tokens
        torch.testing.assert_close(
            reply.features.aux_hidden_states, expected.features.aux_hidden_states, atol=1e-4, rtol=1e-4
        )
        torch.testing.assert_close(
            reply.features.final_hidden, expected.features.final_hidden, atol=1e-4, rtol=1e-4
        )
        assert torch.equal(reply.features.argmax_ids, expected.features.argmax_ids)


def token_agreement(expected: Sequence[Reply | None], replies: Sequence[Reply | None]) -> float:
    """The share of positions (stop token included) where each reply has its expected token,
    over the longer of the two at each prompt."""
    agree = total = 0
    for a, b in zip(expected, replies, strict=True):
        assert a is not None
        assert b is not None
        ours, theirs = [*b.tokens, b.stop_token], [*a.tokens, a.stop_token]
        total += max(len(ours), len(theirs))
        agree += sum(x == y for x, y in zip(ours, theirs, strict=False))
    return agree / total
