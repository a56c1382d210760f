"""The unrolled TTT loss against a dense reference written straight from its definition."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from engine.heads.config import Eagle3HeadConfig
from engine.heads.model import Eagle3DraftModel, TTTKeyValues
from trainer.eagle.ttt import draft_ids_of, teacher_targets, teacher_targets_from_kept_logits, ttt_loss
from trainer.models.tiny import tiny_target_config

VOCAB, DRAFT = 300, 100


def make_head() -> tuple[Eagle3DraftModel, torch.Tensor]:
    torch.manual_seed(0)
    head = Eagle3DraftModel(
        Eagle3HeadConfig.from_target(
            tiny_target_config("LlamaForCausalLM", vocab_size=VOCAB), draft_vocab_size=DRAFT
        )
    )
    kept = torch.randperm(VOCAB)[:DRAFT].sort().values
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[kept] = True
    head.set_draft_vocab(kept - torch.arange(DRAFT), t2d)
    return head, t2d


def random_batch(
    t2d: torch.Tensor, *, seed: int, length: int, masked_share: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two rows of random ids, aux features, target logits and a loss mask."""
    torch.manual_seed(seed)
    ids = torch.randint(0, VOCAB, (2, length))
    aux = torch.randn(2, length, 3 * 64)
    logits = torch.randn(2, length, VOCAB) * 3
    # Make the target's argmax a draft token at most positions.
    logits[..., t2d] += 2.0
    loss_mask = (torch.rand(2, length) > masked_share).long()
    return ids, aux, logits, loss_mask


def reference_loss(  # noqa: PLR0917 - mirrors ttt_loss's inputs one by one
    head: Eagle3DraftModel,
    ids: torch.Tensor,
    aux: torch.Tensor,
    logits: torch.Tensor,
    loss_mask: torch.Tensor,
    steps: int,
    t2d: torch.Tensor,
    final_hidden: torch.Tensor | None = None,
    feature_weight: float = 0.0,
) -> tuple[torch.Tensor, list[float]]:
    """Dense, loop-per-position version: step i at index t feeds token t+1+i and is scored
    against the target's softmax (over the draft vocabulary) at t+1+i, where token t+2+i is
    learned and the target's argmax is a draft token. With ``final_hidden``, the same
    positions also pay ``feature_weight`` x the smooth-L1 distance (mean over the hidden
    size) between the head's normed state and the target's final state at t+1+i."""
    batch, length = ids.shape
    hidden = head.fuse(aux)
    kv = TTTKeyValues()
    positions = torch.arange(length).expand(batch, length)
    total = torch.zeros(())
    accuracy = []
    for step in range(steps):
        shifted = torch.zeros_like(ids)
        shifted[:, : length - 1 - step] = ids[:, 1 + step :]
        hidden = head.forward_ttt_step(shifted, hidden, positions + step, kv)
        log_probs = F.log_softmax(head.compute_logits(hidden), -1)
        normed = head.norm(hidden)
        step_sum, count, hits = torch.zeros(()), 0, 0
        for b in range(batch):
            for t in range(length - 2 - step):
                teacher_at = t + 1 + step
                argmax = int(logits[b, teacher_at].argmax())
                if not (loss_mask[b, t + 2 + step] and t2d[argmax]):
                    continue
                probs = logits[b, teacher_at][t2d].softmax(-1)
                step_sum = step_sum - (probs * log_probs[b, t]).sum()
                if final_hidden is not None:
                    distance = F.smooth_l1_loss(normed[b, t], final_hidden[b, teacher_at], reduction="mean")
                    step_sum = step_sum + feature_weight * distance
                count += 1
                hits += int(log_probs[b, t].argmax()) == int(draft_ids_of(torch.tensor(argmax), t2d))
        total = total + 0.8**step * step_sum / max(count, 1)
        accuracy.append(hits / max(count, 1))
    return total, accuracy


def test_ttt_loss_matches_the_dense_reference_in_value_and_gradient() -> None:
    head, t2d = make_head()
    ids, aux, logits, loss_mask = random_batch(t2d, seed=1, length=11, masked_share=0.3)
    out = ttt_loss(
        head,
        input_ids=ids,
        aux_hidden_states=aux,
        teacher=teacher_targets(logits, t2d),
        loss_mask=loss_mask,
        steps=3,
    )
    out.loss.backward()  # type: ignore[no-untyped-call]
    assert head.fc.weight.grad is not None
    fast_grad = head.fc.weight.grad.clone()
    head.zero_grad()
    expected, accuracy = reference_loss(head, ids, aux, logits, loss_mask, 3, t2d)
    expected.backward()  # type: ignore[no-untyped-call]
    torch.testing.assert_close(out.loss, expected)
    torch.testing.assert_close(head.fc.weight.grad, fast_grad)
    assert out.step_accuracy == accuracy
    assert out.step_counts[0] > out.step_counts[2] > 0


def test_feature_regression_adds_the_distance_to_the_targets_final_state() -> None:
    head, t2d = make_head()
    ids, aux, logits, loss_mask = random_batch(t2d, seed=2, length=9, masked_share=0.2)
    final_hidden = torch.randn(2, 9, 64)
    out = ttt_loss(
        head,
        input_ids=ids,
        aux_hidden_states=aux,
        teacher=teacher_targets(logits, t2d),
        loss_mask=loss_mask,
        steps=2,
        target_final_hidden=final_hidden,
        feature_loss_weight=0.5,
    )
    out.loss.backward()  # type: ignore[no-untyped-call]
    assert head.norm.weight.grad is not None
    fast_grad = head.norm.weight.grad.clone()
    head.zero_grad()
    expected, _ = reference_loss(head, ids, aux, logits, loss_mask, 2, t2d, final_hidden, 0.5)
    expected.backward()  # type: ignore[no-untyped-call]
    torch.testing.assert_close(out.loss, expected)
    torch.testing.assert_close(head.norm.weight.grad, fast_grad)
    assert out.step_feature_losses is not None
    assert all(loss > 0 for loss in out.step_feature_losses)


def test_feature_regression_is_zero_where_the_head_reproduces_the_target_state() -> None:
    head, t2d = make_head()
    ids = torch.randint(0, VOCAB, (1, 7))
    aux = torch.randn(1, 7, 3 * 64)
    with torch.no_grad():
        kv = TTTKeyValues()
        step0 = head.forward_ttt_step(ids.roll(-1, 1), head.fuse(aux), torch.arange(7)[None], kv)
        # Position t's step-0 state is scored against the target's state at t+1.
        final_hidden = head.norm(step0).roll(1, 1)
    out = ttt_loss(
        head,
        input_ids=ids,
        aux_hidden_states=aux,
        teacher=teacher_targets(torch.randn(1, 7, VOCAB), t2d),
        loss_mask=torch.ones(1, 7, dtype=torch.long),
        steps=1,
        target_final_hidden=final_hidden,
        feature_loss_weight=1.0,
    )
    assert out.step_feature_losses is not None
    assert out.step_feature_losses[0] < 1e-6


def test_teacher_from_kept_logits_equals_slicing_full_logits() -> None:
    _, t2d = make_head()
    logits = torch.randn(2, 5, VOCAB)
    full = teacher_targets(logits, t2d)
    kept = teacher_targets_from_kept_logits(logits[..., t2d], logits.argmax(-1), t2d)
    torch.testing.assert_close(kept.probs, full.probs)
    assert torch.equal(kept.argmax_draft_id, full.argmax_draft_id)


def test_draft_ids_follow_target_order_and_mark_missing_ids() -> None:
    t2d = torch.tensor([False, True, False, True, True])
    assert draft_ids_of(torch.tensor([1, 3, 4, 0, 2]), t2d).tolist() == [0, 1, 2, -1, -1]


def test_no_masked_positions_gives_zero_loss_not_nan() -> None:
    head, t2d = make_head()
    ids = torch.randint(0, VOCAB, (1, 6))
    out = ttt_loss(
        head,
        input_ids=ids,
        aux_hidden_states=torch.randn(1, 6, 3 * 64),
        teacher=teacher_targets(torch.randn(1, 6, VOCAB), t2d),
        loss_mask=torch.zeros(1, 6, dtype=torch.long),
        steps=2,
    )
    assert float(out.loss.detach()) == 0.0
    assert out.step_counts == [0, 0]
