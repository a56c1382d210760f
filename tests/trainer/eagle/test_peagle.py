"""The P-EAGLE head: its loss is what one parallel-drafting forward sees, its format round-trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name
from safetensors.torch import load_file, save_file

from engine.heads.config import Eagle3HeadConfig
from engine.heads.export import export_head, load_head
from engine.heads.head_format import InvalidHeadError
from engine.heads.model import DraftKVCache
from engine.heads.peagle import PEagleDraftModel, PEagleHeadConfig, default_mask_token_id
from engine.heads.validate import validate_head
from trainer.eagle.peagle_ttt import _kept_anchors, parallel_loss
from trainer.eagle.ttt import teacher_targets
from trainer.models.tiny import build_tiny_target

VOCAB = 64


def _head(seed: int = 0) -> tuple[torch.nn.Module, PEagleDraftModel]:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB, seed=1)
    base = Eagle3HeadConfig.from_target(target.config, draft_vocab_size=VOCAB)
    config = PEagleHeadConfig(**base.model_dump(), mask_token_id=default_mask_token_id(target.config))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = PEagleDraftModel(config)
        # Large enough to matter in the attention (the trained value is far from its init).
        head.mask_hidden.data.normal_(0.0, 1.0)
    head.set_draft_vocab(torch.zeros(VOCAB, dtype=torch.long), torch.ones(VOCAB, dtype=torch.bool))
    head.load_target_embeddings(target.get_input_embeddings().weight.detach())
    return target, head


def _inference_prenorm(
    head: PEagleDraftModel, ids: torch.Tensor, aux: torch.Tensor, t: int, depth: int
) -> torch.Tensor:
    """What one drafting forward gives at slot ``depth`` for anchor ``t`` (batch row alone)."""
    mask_ids, mask_hidden = head.mask_inputs(depth)
    step_ids = torch.cat([ids[1 : t + 2], mask_ids]).unsqueeze(0)
    hidden = torch.cat([head.fuse(aux[: t + 1]), mask_hidden]).unsqueeze(0)
    positions = torch.arange(t + 1 + depth).unsqueeze(0)
    return head(step_ids, hidden, positions, DraftKVCache())[0, -1]


def test_parallel_loss_is_the_loss_of_one_drafting_forward_per_anchor() -> None:
    _, head = _head()
    head.eval()
    generator = torch.Generator().manual_seed(3)
    batch, length, depths = 2, 14, 4
    ids = torch.randint(0, VOCAB, (batch, length), generator=generator)
    aux = torch.randn(batch, length, 3 * head.config.target_hidden_size, generator=generator)
    logits = torch.randn(batch, length, VOCAB, generator=generator) * 3
    loss_mask = torch.ones(batch, length, dtype=torch.long)
    loss_mask[:, :3] = 0
    loss_mask[1, 11:] = 0  # a shorter second row
    teacher = teacher_targets(logits, head.t2d)

    with torch.no_grad():
        out = parallel_loss(
            head, input_ids=ids, aux_hidden_states=aux, teacher=teacher, loss_mask=loss_mask, depths=depths
        )
        for depth in range(depths):
            losses = []
            for row in range(batch):
                for t in range(length):
                    learned = t + 2 + depth
                    if learned >= length or not loss_mask[row, learned]:
                        continue
                    prenorm = _inference_prenorm(head, ids[row], aux[row], t, depth)
                    draft_logits = head.compute_logits(prenorm)
                    losses.append(
                        F.cross_entropy(draft_logits[None], teacher.probs[row, t + 1 + depth][None])
                    )
            assert out.step_counts[depth] == len(losses)
            assert out.step_losses[depth] == pytest.approx(float(torch.stack(losses).mean()), rel=1e-4)


def test_drop_token_sampling_keeps_about_r_to_the_depth_of_the_positions() -> None:
    _, head = _head()
    head.train()
    batch, length, depths = 4, 200, 4
    ids = torch.randint(0, VOCAB, (batch, length))
    aux = torch.randn(batch, length, 3 * head.config.target_hidden_size)
    teacher = teacher_targets(torch.randn(batch, length, VOCAB), head.t2d)
    loss_mask = torch.ones(batch, length, dtype=torch.long)
    torch.manual_seed(0)
    out = parallel_loss(
        head,
        input_ids=ids,
        aux_hidden_states=aux,
        teacher=teacher,
        loss_mask=loss_mask,
        depths=depths,
        keep_ratio=0.7,
    )
    for depth in range(1, depths):
        full = batch * (length - 2 - depth)
        assert out.step_counts[depth] == pytest.approx(full * 0.7**depth, rel=0.15)
    out.loss.backward()  # type: ignore[no-untyped-call]
    assert head.mask_hidden.grad is not None
    assert float(head.mask_hidden.grad.abs().sum()) > 0.0


def test_export_writes_vllms_peagle_layout_and_loads_back(tmp_path: Path) -> None:
    target, head = _head()
    head_dir = export_head(head, tmp_path / "head", trained_speculative_tokens=4)

    config = json.loads((head_dir / "config.json").read_text())
    assert config["architectures"] == ["PeagleLlamaForCausalLM"]
    assert config["mask_token_id"] == head.config.mask_token_id
    assert config["speculators_model_type"] == "peagle"
    assert config["eaglenest"]["serve_with"]["vllm_speculative_config"] == {
        "method": "eagle3",
        "parallel_drafting": True,
        "num_speculative_tokens": 4,
    }
    tensors = load_file(str(head_dir / "model.safetensors"))
    assert tuple(tensors["mask_hidden"].shape) == (1, 1, 3 * head.config.target_hidden_size)

    loaded = load_head(head_dir, target)
    assert isinstance(loaded, PEagleDraftModel)
    assert loaded.config == head.config
    torch.testing.assert_close(loaded.mask_hidden, head.mask_hidden)


def test_a_peagle_head_without_mask_hidden_is_refused(tmp_path: Path) -> None:
    target, head = _head()
    head_dir = export_head(head, tmp_path / "head")
    tensors = load_file(str(head_dir / "model.safetensors"))
    del tensors["mask_hidden"]
    save_file(tensors, str(head_dir / "model.safetensors"))
    with pytest.raises(InvalidHeadError, match="missing tensor 'mask_hidden'"):
        validate_head(head_dir, target.config)


def test_dropped_anchors_are_drawn_from_the_generator_a_checkpoint_restores() -> None:
    # A checkpoint saves the CPU's generator only (trainer.eagle.checkpoint): anchors drawn from a
    # GPU's own generator would differ between a straight run and one resumed from a checkpoint.
    # The meta device stands in for the GPU: a device whose generator no checkpoint holds.
    mask = torch.ones((4, 16), dtype=torch.bool)
    torch.manual_seed(7)
    on_cpu = _kept_anchors(mask, 0.5)
    after_cpu = torch.get_rng_state()
    torch.manual_seed(7)
    on_device = _kept_anchors(mask.to("meta"), 0.5)
    assert on_device.device.type == "meta"
    # The CPU's generator moved on as the CPU run's did: the device's draws are the CPU's.
    assert torch.equal(torch.get_rng_state(), after_cpu)
    assert on_cpu.any()
    assert not on_cpu.all()
