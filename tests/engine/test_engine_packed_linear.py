"""oneDNN-packed linear layers compute what nn.Linear computes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from engine.packed_linear import PackedLinear, pack_linear_layers, packable_dtypes, packing_available
from tests.speculative.engine_doubles import tiny_target

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
