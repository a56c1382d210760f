"""Checkpoint files, pointers, pruning and exact restore of head, optimizer and RNG."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from engine.heads.config import Eagle3HeadConfig
from engine.heads.model import Eagle3DraftModel
from trainer.eagle.checkpoint import (
    OPTIMIZER_FILE,
    best_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    read_checkpoint_state,
    save_checkpoint,
)
from trainer.models.tiny import tiny_target_config


def make_head_and_optimizer(seed: int) -> tuple[Eagle3DraftModel, torch.optim.AdamW]:
    torch.manual_seed(seed)
    config = Eagle3HeadConfig.from_target(
        tiny_target_config("LlamaForCausalLM", vocab_size=300), draft_vocab_size=50
    )
    head = Eagle3DraftModel(config)
    optimizer = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=1e-3)
    return head, optimizer


def take_a_step(head: Eagle3DraftModel, optimizer: torch.optim.Optimizer) -> None:
    loss = head.compute_logits(head.fuse(torch.randn(1, 4, 192))).pow(2).mean()
    loss.backward()  # type: ignore[no-untyped-call]
    optimizer.step()
    optimizer.zero_grad()


def test_restore_gives_back_weights_optimizer_and_rng(tmp_path: Path) -> None:
    head, optimizer = make_head_and_optimizer(0)
    take_a_step(head, optimizer)
    path = save_checkpoint(tmp_path, step=1, head=head, optimizer=optimizer, state={"total_steps": 10})
    torch_next, python_next = torch.rand(3), random.random()
    take_a_step(head, optimizer)
    expected = {k: v.clone() for k, v in head.state_dict().items()}

    other, other_optimizer = make_head_and_optimizer(1)
    state = load_checkpoint(path, head=other, optimizer=other_optimizer)
    assert state == {"total_steps": 10, "step": 1}
    assert torch.equal(torch.rand(3), torch_next)
    assert random.random() == python_next
    take_a_step(other, other_optimizer)
    for name, tensor in other.state_dict().items():
        if not name.startswith("embed_tokens"):
            assert torch.equal(tensor, expected[name]), name


def test_checkpoint_has_no_target_embeddings(tmp_path: Path) -> None:
    head, optimizer = make_head_and_optimizer(0)
    path = save_checkpoint(tmp_path, step=3, head=head, optimizer=optimizer, state={})
    names = set(load_file(str(path / "head.safetensors")))
    assert "fc.weight" in names
    assert "d2t" in names
    assert not any("embed" in n for n in names)


def test_pointers_and_pruning_keep_latest_and_best(tmp_path: Path) -> None:
    head, optimizer = make_head_and_optimizer(0)
    assert latest_checkpoint(tmp_path) is None
    assert best_checkpoint(tmp_path) is None
    for step in (10, 20, 30, 40):
        save_checkpoint(
            tmp_path, step=step, head=head, optimizer=optimizer, state={"s": step}, is_best=step == 20
        )
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000040"
    assert best_checkpoint(tmp_path) == tmp_path / "step-00000020"
    kept = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert kept == ["step-00000020", "step-00000030", "step-00000040"]
    assert read_checkpoint_state(tmp_path / "step-00000030") == {"s": 30, "step": 30}


def test_a_half_written_checkpoint_is_never_pointed_at(tmp_path: Path) -> None:
    head, optimizer = make_head_and_optimizer(0)
    save_checkpoint(tmp_path, step=5, head=head, optimizer=optimizer, state={})
    # A crash after staging a newer checkpoint but before the rename leaves the old pointer.
    (tmp_path / ".step-00000006.partial").mkdir()
    (tmp_path / "step-00000007").mkdir()  # no state.json: incomplete
    (tmp_path / "latest").write_text("step-00000007\n")
    assert latest_checkpoint(tmp_path) is None
    (tmp_path / "latest").write_text("step-00000005\n")
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000005"


def test_a_checkpoint_saved_on_a_gpu_resumes_on_another_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """optimizer.pt as rank 0 writes it on a GPU: its moments' storages are tagged cuda:0, which
    torch.load restores onto GPU 0 unless told otherwise (GPU 0 in every helper rank; an error
    on a CPU). The tag is the one part of a GPU save this test stands in for; rng.pt holds the
    CPU generator's state, tagged cpu on any machine."""
    head, optimizer = make_head_and_optimizer(0)
    take_a_step(head, optimizer)
    expected = optimizer.state_dict()
    save = torch.save

    def save_from_a_gpu(obj: object, file: Path, **kwargs: Any) -> None:
        with monkeypatch.context() as patch:
            if file.name == OPTIMIZER_FILE:
                patch.setattr(torch.serialization, "location_tag", lambda _storage: "cuda:0")
            save(obj, file, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(torch, "save", save_from_a_gpu)
        path = save_checkpoint(tmp_path, step=1, head=head, optimizer=optimizer, state={})

    other, other_optimizer = make_head_and_optimizer(1)
    load_checkpoint(path, head=other, optimizer=other_optimizer)
    restored = other_optimizer.state_dict()["state"]
    for index, moments in expected["state"].items():
        for name in ("exp_avg", "exp_avg_sq"):
            assert restored[index][name].device == torch.device("cpu")
            assert torch.equal(restored[index][name], moments[name])
