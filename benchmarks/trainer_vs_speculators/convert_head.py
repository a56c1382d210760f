"""Convert a speculators 0.9.0 EAGLE-3 checkpoint to eaglenest's native EAGLE-3 head format.

Run with eaglenest's python (run_speculators.sh does, as its last step):

    .venv/bin/python benchmarks/trainer_vs_speculators/convert_head.py CHECKPOINT_DIR HEAD_DIR \
        --target .cache/models/smollm2-135m-instruct

The config.json is written by eaglenest's own ``head_format.export_config`` and the tensors are
checked against its ``expected_tensor_shapes``.

Mapping (speculators -> native):
  fc.weight -> fc.weight            (input order = aux ids [2,15,27], same in both)
  layers.0.* -> midlayer.*          (hidden_norm, input_layernorm, self_attn.{q,k,v,o}_proj,
                                     post_attention_layernorm, mlp.{gate,up,down}_proj)
  norm.weight, lm_head.weight       unchanged
  d2t, t2d                          unchanged: both use d2t as an OFFSET
                                    (target = draft + d2t[draft]) and t2d as a bool mask
  embed_tokens.weight               dropped (the target's, frozen in speculators)
Only the classic form converts: norm_before_residual / norm_before_fc / norm_output / fc_norm
must all be false (the native format has none of them), checked on the checkpoint config.
Aux ids: speculators/vLLM ids are "input of layer i" (= transformers output_hidden_states[i]),
the native convention too, so they are copied as they are.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from engine.heads.config import Eagle3HeadConfig
from engine.heads.head_format import expected_tensor_shapes, export_config

# Flags of speculators' EAGLE-3 variants that the native (classic) format has no counterpart for.
UNSUPPORTED_FLAGS = ("norm_before_residual", "norm_before_fc", "norm_output", "fc_norm")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", help="speculators checkpoint dir (config.json, model.safetensors)")
    parser.add_argument("out", help="native head dir to write")
    parser.add_argument("--target", required=True, help="target model dir (for its architecture)")
    parser.add_argument("--dtype", default="bfloat16")
    return parser.parse_args()


def head_config(checkpoint: Path, spec_config: dict[str, Any], target: Path) -> Eagle3HeadConfig:
    """The native head config of a classic one-layer speculators draft; exits on any other form."""
    for flag in UNSUPPORTED_FLAGS:
        if spec_config.get(flag):
            raise SystemExit(f"{checkpoint}: {flag}=true has no counterpart in the native format")
    layer = spec_config["transformer_layer_config"]
    if layer.get("num_hidden_layers", 1) != 1:
        raise SystemExit("only one-layer drafts convert")
    target_config = json.loads((target / "config.json").read_text())
    rope = layer.get("rope_parameters") or {
        "rope_type": "default",
        "rope_theta": layer.get("rope_theta", 10000.0),
    }
    hidden = layer["hidden_size"]
    heads = layer["num_attention_heads"]
    return Eagle3HeadConfig(
        variant="eagle3",
        hidden_size=hidden,
        target_hidden_size=target_config["hidden_size"],
        intermediate_size=layer["intermediate_size"],
        num_attention_heads=heads,
        num_key_value_heads=layer.get("num_key_value_heads", heads),
        head_dim=layer.get("head_dim") or hidden // heads,
        rms_norm_eps=layer["rms_norm_eps"],
        rope_parameters=dict(rope),
        max_position_embeddings=layer["max_position_embeddings"],
        vocab_size=layer["vocab_size"],
        draft_vocab_size=spec_config["draft_vocab_size"],
        aux_layer_ids=list(spec_config["eagle_aux_hidden_state_layer_ids"]),
        hidden_act=layer.get("hidden_act", "silu"),
        target_architecture=(target_config.get("architectures") or [""])[0],
    )


def native_tensors(source: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Renamed and cast: the verifier's embedding dropped, d2t as long offsets, t2d as a bool mask."""
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in source.items():
        if name.startswith(("embed_tokens.", "verifier_")):
            continue
        new = "midlayer." + name[len("layers.0.") :] if name.startswith("layers.0.") else name
        if name.startswith("layers.") and not name.startswith("layers.0."):
            raise SystemExit(f"unexpected tensor {name}")
        if new == "d2t":
            tensors[new] = tensor.to(torch.long).contiguous()
        elif new == "t2d":
            tensors[new] = tensor.to(torch.bool).contiguous()
        else:
            tensors[new] = tensor.to(dtype).contiguous()
    return tensors


def check_layout(tensors: dict[str, torch.Tensor], config: Eagle3HeadConfig) -> None:
    want = expected_tensor_shapes(config)
    got = {name: tuple(tensor.shape) for name, tensor in tensors.items()}
    if got != want:
        raise SystemExit(f"tensor layout mismatch:\n got  {got}\n want {want}")
    # d2t is an offset table in both: draft i -> target i + d2t[i]; t2d marks exactly those ids
    d2t, t2d = tensors["d2t"], tensors["t2d"]
    targets = torch.arange(d2t.numel()) + d2t
    assert bool(t2d[targets].all()), "d2t/t2d disagree"
    assert int(t2d.sum()) == d2t.numel(), "d2t/t2d disagree"
    assert bool((targets[1:] > targets[:-1]).all()), "draft ids not sorted by target id"


def main() -> None:
    args = parse_args()
    checkpoint = Path(args.checkpoint)
    spec_config = json.loads((checkpoint / "config.json").read_text())
    config = head_config(checkpoint, spec_config, Path(args.target))
    dtype = getattr(torch, args.dtype)
    tensors = native_tensors(load_file(str(checkpoint / "model.safetensors")), dtype)
    check_layout(tensors, config)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config_json = export_config(config, dtype=dtype)
    config_json["eaglenest"]["converted_from"] = {
        "tool": "speculators 0.9.0",
        "checkpoint": str(checkpoint.resolve()),
        "mapping": "layers.0.* -> midlayer.*; d2t offsets and t2d mask copied as is",
    }
    (out / "config.json").write_text(json.dumps(config_json, indent=2) + "\n")
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    print(f"converted {checkpoint} -> {out} ({len(tensors)} tensors)")


if __name__ == "__main__":
    main()
