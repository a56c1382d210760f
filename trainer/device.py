"""Which device a model runs on: ``auto``, ``cpu`` or ``cuda``, as every command and the worker spell it.

The code paths are the same on both: weights, KV caches and batches live on the chosen
device, and only the precision differs (bf16 on a GPU that multiplies it natively, where
CPU runs default to float32 weights). CPU stays the default everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

DeviceName = Literal["auto", "cpu", "cuda"]
DEVICE_NAMES: tuple[str, ...] = get_args(DeviceName)


def device_type(name: str) -> str:
    """What ``name`` runs on here, ``cpu`` or ``cuda``, without asking for it to be there:
    ``auto`` is ``cuda`` when torch sees a GPU, and ``cuda`` stays ``cuda`` without one (a run
    there fails, saying so: ``resolve_device``)."""
    if name not in DEVICE_NAMES:
        raise ValueError(f"device must be one of {', '.join(DEVICE_NAMES)}, got {name!r}")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def resolve_device(name: str) -> torch.device:
    """``auto`` is the GPU when torch sees one, else the CPU; ``cuda`` without a GPU is an error."""
    if device_type(name) == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    raise ValueError(
        f"device cuda: torch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is false: "
        "no GPU, no driver, or a CPU-only torch build); use device cpu or auto"
    )


def model_dtype(device: torch.device, requested: str | None = None) -> torch.dtype:
    """Weights of an inference model: as requested, else bf16 on a GPU that supports it, else float32."""
    if requested is not None:
        dtype = getattr(torch, requested, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"dtype {requested!r} is not a torch dtype")
        return dtype
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def bf16_matmuls_native(device: torch.device) -> bool:
    """Whether bf16 autocast speeds this device up: a CUDA GPU with bf16, a CPU with AVX512-BF16/AMX."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def load_causal_lm(model_dir: Path | str, *, device: torch.device, dtype: torch.dtype) -> PreTrainedModel:
    """A Hugging Face causal LM with its weights on ``device`` (its KV caches follow them)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    torch.nn.Module.to(model, device)
    return model
