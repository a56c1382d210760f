"""oneDNN-packed linear layers compute what nn.Linear computes; the batched path packs its
small products while it runs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from engine.dispatched_ops import DispatchedOps
from engine.generation import generate_batched
from engine.packed_linear import (
    PackedLinear,
    pack_linear_layers,
    packable_dtypes,
    packing_available,
    small_products_packed,
)
from engine.runner import SlotRunner
from engine.sampling import SamplingParams
from tests.speculative.engine_doubles import tiny_target
from trainer.models.tiny import build_tiny_target

pytestmark = pytest.mark.skipif(
    not packing_available(torch.device("cpu")), reason="oneDNN is not available in this torch build"
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_packed_matches_linear(dtype: torch.dtype, bias: bool) -> None:
    if dtype not in packable_dtypes():
        pytest.skip(f"this CPU has no oneDNN layout for {dtype}")
    torch.manual_seed(0)
    linear = nn.Linear(96, 160, bias=bias).to(dtype)
    x = torch.randn(1, 7, 96, dtype=dtype)
    packed = PackedLinear(linear)
    with torch.inference_mode():
        expected = torch.nn.functional.linear(
            x.float(), linear.weight.float(), None if linear.bias is None else linear.bias.float()
        )
        tolerance = 1e-4 if dtype == torch.float32 else 5e-2
        torch.testing.assert_close(packed(x).float(), expected, atol=tolerance, rtol=tolerance)
    assert packed.weight is linear.weight


def test_rows_do_not_depend_on_how_many_rows_are_computed() -> None:
    """Scoring K+1 tokens at once gives each token the result it gets alone."""
    torch.manual_seed(0)
    packed = PackedLinear(nn.Linear(576, 1536, bias=False))
    x = torch.randn(1, 6, 576)
    with torch.inference_mode():
        together = packed(x)
        for row in range(6):
            assert torch.equal(packed(x[:, row : row + 1])[0, 0], together[0, row])


def test_model_is_packed_in_place_and_keeps_its_weights() -> None:
    target = tiny_target("Qwen2ForCausalLM")
    ids = torch.tensor([[5, 17, 33, 8, 41]])
    with torch.inference_mode():
        before = target(ids).logits
    state_before = {name: tensor.clone() for name, tensor in target.state_dict().items()}
    linears = sum(1 for module in target.modules() if type(module) is nn.Linear)

    assert pack_linear_layers(target) == linears
    assert not any(type(module) is nn.Linear for module in target.modules())
    with torch.inference_mode():
        torch.testing.assert_close(target(ids).logits, before, atol=1e-4, rtol=1e-4)
    state_after = target.state_dict()
    assert state_after.keys() == state_before.keys()
    assert all(torch.equal(state_after[name], tensor) for name, tensor in state_before.items())


def test_a_dtype_this_cpu_cannot_pack_keeps_the_stock_linear() -> None:
    """bfloat16 packing needs AVX512 or AVX-NE-CONVERT; without them the layer stays nn.Linear."""
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)).to(torch.bfloat16)
    replaced = pack_linear_layers(model)
    expected = 2 if torch.bfloat16 in packable_dtypes() else 0
    assert replaced == expected
    assert sum(isinstance(layer, PackedLinear) for layer in model) == expected
    with torch.inference_mode():
        assert model(torch.ones(1, 8, dtype=torch.bfloat16)).dtype == torch.bfloat16


def matmul_ops(module: nn.Module, rows: int) -> list[str]:
    with torch.inference_mode(), DispatchedOps() as ops:
        module(torch.randn(rows, 1, 64))
    return [name for name in ops.names if "linear" in name or "mm" in name]


def test_above_max_packed_rows_a_product_runs_unpacked_with_the_same_result() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(64, 96)
    packed = PackedLinear(linear, max_packed_rows=8)
    assert matmul_ops(packed, 8) == ["mkldnn._linear_pointwise"]
    assert "mkldnn._linear_pointwise" not in matmul_ops(packed, 9)
    x = torch.randn(9, 1, 64)
    with torch.inference_mode():
        torch.testing.assert_close(packed(x), linear(x))
        torch.testing.assert_close(packed(x[:8]), linear(x[:8]), atol=1e-5, rtol=1e-4)


def test_small_products_are_packed_inside_the_block_and_the_model_comes_back_unchanged() -> None:
    target = tiny_target("Qwen2ForCausalLM")
    originals = {name: module for name, module in target.named_modules() if type(module) is nn.Linear}
    with small_products_packed(target, max_packed_rows=4) as packed:
        assert packed == len(originals)
        assert all(isinstance(target.get_submodule(name), PackedLinear) for name in originals)
    assert {name: target.get_submodule(name) for name in originals} == originals


GATE = "model.layers.0.mlp.gate_proj"


def test_the_slot_runner_packs_a_float32_target_while_open_and_decodes_as_unpacked() -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=96)
    hidden = torch.randn(3, target.config.hidden_size)
    runner = SlotRunner(target, slots=4, capacity=16)
    try:
        assert matmul_ops(runner.head, 3) == ["mkldnn._linear_pointwise"]
        assert isinstance(target.get_submodule(GATE), PackedLinear)
        with torch.inference_mode():
            logits = runner.logits(hidden)
    finally:
        runner.close()
    assert type(target.lm_head) is nn.Linear
    assert type(target.get_submodule(GATE)) is nn.Linear
    with torch.inference_mode():
        torch.testing.assert_close(logits, target.lm_head(hidden), atol=1e-5, rtol=1e-4)


def test_generate_batched_replies_as_generate_does_with_packed_weights() -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=96)
    prompts = [[5, 17, 33, 8], [40, 2, 71], [9, 9, 12, 60, 61, 3]]
    expected = [
        target.generate(  # type: ignore[operator]
            torch.tensor([p]), do_sample=False, max_new_tokens=5, min_new_tokens=5, pad_token_id=0
        )[0, len(p) :].tolist()
        for p in prompts
    ]
    packed_calls: list[int] = []
    forward = PackedLinear.forward

    def counting(self: PackedLinear, x: torch.Tensor) -> torch.Tensor:
        packed_calls.append(x.numel() // x.shape[-1])
        return forward(self, x)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PackedLinear, "forward", counting)
        replies, _ = generate_batched(
            target,
            prompts,
            stop_ids=[97],
            max_new_tokens=5,
            batch_size=1,
            sampling=SamplingParams(temperature=0.0, top_p=1.0),
        )
    assert packed_calls
    assert [reply.tokens for reply in replies if reply is not None] == expected
