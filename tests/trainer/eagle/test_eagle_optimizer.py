"""The head's optimizers: which weights Muon takes, and checkpoints that resume exactly."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from trainer.eagle.optimizer import build_optimizer


class _TinyHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4, bias=False)
        self.norm = nn.LayerNorm(4)
        self.lm_head = nn.Linear(4, 5, bias=False)
        self.frozen = nn.Linear(4, 4, bias=False)
        self.frozen.weight.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(self.fc(x)))  # type: ignore[no-any-return]


def _loss(head: _TinyHead, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(head(x), y)


def test_muon_takes_the_hidden_matrices_and_adamw_the_output_layer_and_norms() -> None:
    head = _TinyHead()
    optimizer = build_optimizer(head, name="muon", lr=1e-2, weight_decay=0.0)
    state = optimizer.state_dict()
    assert set(state) == {"muon", "adamw"}
    muon_params = [p for group in optimizer.param_groups[:1] for p in group["params"]]
    assert [p.shape for p in muon_params] == [head.fc.weight.shape]
    adamw_params = {id(p) for group in optimizer.param_groups[1:] for p in group["params"]}
    assert adamw_params == {id(head.lm_head.weight), id(head.norm.weight), id(head.norm.bias)}


@pytest.mark.parametrize("name", ["adamw", "muon"])
def test_training_lowers_the_loss_and_a_saved_state_resumes_identically(name: str) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(32, 6), torch.randint(0, 5, (32,))
    head = _TinyHead()
    optimizer = build_optimizer(head, name=name, lr=1e-2, weight_decay=0.0)  # type: ignore[arg-type]
    first = float(_loss(head, x, y))
    for _ in range(20):
        optimizer.zero_grad()
        _loss(head, x, y).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    assert float(_loss(head, x, y)) < first
    # A copy restored from the saved weights and optimizer state takes the same next step.
    twin = _TinyHead()
    twin.load_state_dict(head.state_dict())
    restored = build_optimizer(twin, name=name, lr=1e-2, weight_decay=0.0)  # type: ignore[arg-type]
    # A deep copy, as a checkpoint file is: a live state dict shares the moment tensors.
    restored.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    for model, opt in ((head, optimizer), (twin, restored)):
        opt.zero_grad()
        _loss(model, x, y).backward()  # type: ignore[no-untyped-call]
        opt.step()
    torch.testing.assert_close(twin.fc.weight, head.fc.weight)


def test_a_checkpoint_of_another_optimizer_is_refused_by_name() -> None:
    head = _TinyHead()
    muon = build_optimizer(head, name="muon", lr=1e-2, weight_decay=0.0)
    with pytest.raises(ValueError, match="saved with"):
        muon.load_state_dict({"adamw": {}})
