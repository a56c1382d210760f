"""Hidden-state capture at the input of decoder layers, for every supported architecture."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, LlamaConfig

from engine.capture import (
    SUPPORTED_ARCHITECTURES,
    TargetFeatureCapture,
    UnsupportedArchitectureError,
    check_supported,
    decoder_layers,
)
from trainer.models.tiny import build_tiny_target, tiny_target_config

AUX = [2, 4, 5]


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_captured_states_equal_hf_hidden_states_at_layer_inputs(architecture: str) -> None:
    model = build_tiny_target(architecture, vocab_size=300)
    # Longer than GPT-OSS's 8-token sliding window, so its sliding layers are exercised.
    input_ids = torch.randint(3, 300, (2, 24))
    with torch.no_grad(), TargetFeatureCapture(model, AUX) as capture:
        out = model(input_ids, output_hidden_states=True)
        aux = capture.aux_hidden_states()
    assert aux.shape == (2, 24, 3 * model.config.hidden_size)
    # hidden_states[i] is the input of decoder layer i (hidden_states[0] = embeddings).
    for index, layer_id in enumerate(AUX):
        width = model.config.hidden_size
        torch.testing.assert_close(aux[..., index * width : (index + 1) * width], out.hidden_states[layer_id])
    # Different layers really are different states (the capture is not reading one tensor thrice).
    assert not torch.equal(out.hidden_states[2], out.hidden_states[4])


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_capture_inside_cached_decode_step_matches_full_forward(architecture: str) -> None:
    """The engine captures during KV-cached steps: the new position's state must be the same."""
    model = build_tiny_target(architecture, vocab_size=300)
    input_ids = torch.randint(3, 300, (1, 12))
    with torch.no_grad():
        full = model(input_ids, output_hidden_states=True)
        cache = DynamicCache(config=model.config)
        model(input_ids[:, :-1], past_key_values=cache, use_cache=True)
        with TargetFeatureCapture(model, AUX) as capture:
            model(input_ids[:, -1:], past_key_values=cache, use_cache=True)
            step = capture.aux_hidden_states()
    expected = torch.cat([full.hidden_states[i][:, -1:] for i in AUX], dim=-1)
    assert step.shape == (1, 1, 3 * model.config.hidden_size)
    torch.testing.assert_close(step, expected, atol=1e-5, rtol=1e-4)


def test_capture_reads_hidden_states_passed_as_keyword() -> None:
    model = build_tiny_target("LlamaForCausalLM", vocab_size=300)
    hidden = torch.randn(1, 5, model.config.hidden_size)
    positions = torch.arange(5)[None]
    rotary = model.model.rotary_emb(hidden, positions)
    with torch.no_grad(), TargetFeatureCapture(model, [2, 3, 4]) as capture:
        decoder_layers(model)[3](hidden_states=hidden, position_embeddings=rotary, position_ids=positions)
        assert torch.equal(capture.layer_hidden_state(3), hidden)


def test_hooks_are_removed_on_exit_and_states_follow_the_latest_forward() -> None:
    model = build_tiny_target("Qwen3ForCausalLM", vocab_size=300)
    layers = decoder_layers(model)
    with torch.no_grad(), TargetFeatureCapture(model, AUX) as capture:
        model(torch.randint(3, 300, (1, 6)))
        model(torch.randint(3, 300, (1, 9)))
        assert capture.aux_hidden_states().shape[1] == 9
    assert all(not layer._forward_pre_hooks for layer in layers)


def test_reading_before_any_forward_says_what_to_do() -> None:
    model = build_tiny_target("LlamaForCausalLM", vocab_size=300)
    with TargetFeatureCapture(model, AUX) as capture, pytest.raises(RuntimeError, match="run a forward"):
        capture.aux_hidden_states()


def test_out_of_range_aux_layer_is_rejected_with_the_valid_range() -> None:
    model = build_tiny_target("LlamaForCausalLM", vocab_size=300)
    # 8 is the final norm's output (EAGLE-2's feature); 9 is past everything.
    with pytest.raises(ValueError, match=r"\[9\] are out of range .* 8 decoder layers \(valid: 0\.\.8"):
        TargetFeatureCapture(model, [2, 4, 9])


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_supported_architectures_pass_the_check(architecture: str) -> None:
    assert check_supported(tiny_target_config(architecture, vocab_size=300)) == architecture


def test_unsupported_architecture_error_names_it_and_the_supported_list() -> None:
    config = LlamaConfig(architectures=["MistralForCausalLM"])
    with pytest.raises(UnsupportedArchitectureError) as error:
        check_supported(config)
    message = str(error.value)
    assert "'MistralForCausalLM' is not supported" in message
    for architecture in SUPPORTED_ARCHITECTURES:
        assert architecture in message


def test_config_without_architectures_is_rejected() -> None:
    with pytest.raises(
        UnsupportedArchitectureError, match=r"declares no 'architectures'.*model_type='llama'"
    ):
        check_supported(LlamaConfig())


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_id_past_the_last_layer_captures_the_final_normed_state(architecture: str) -> None:
    """EAGLE-2's feature, id N, is transformers' hidden_states[N]: the final norm's output."""
    model = build_tiny_target(architecture, vocab_size=300)
    layers = len(decoder_layers(model))
    input_ids = torch.randint(3, 300, (2, 12))
    with torch.no_grad(), TargetFeatureCapture(model, [layers]) as capture:
        out = model(input_ids, output_hidden_states=True)
        feature = capture.aux_hidden_states()
    torch.testing.assert_close(feature, out.hidden_states[layers])
    torch.testing.assert_close(model.lm_head(feature), out.logits)
