"""Base-model directories on S3 (SeaweedFS) for worker tests that never load the model."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import torch
from safetensors.torch import save

# Validation checks that these exist; nothing in these tests parses them.
TOKENIZER_FILES = {"tokenizer_config.json": b"{}", "tokenizer.json": b"{}"}
LLAMA_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}


def model_files(
    *, config: dict[str, Any] | None = None, weights: bool = True, tokenizer: bool = True
) -> dict[str, bytes]:
    """A Hugging Face model directory's files (config.json, tokenizer files, real safetensors)."""
    files = {"config.json": json.dumps(config if config is not None else LLAMA_CONFIG).encode()}
    if tokenizer:
        files.update(TOKENIZER_FILES)
    if weights:
        files["model.safetensors"] = save({"model.embed_tokens.weight": torch.zeros(4, 2)})
    return files


def upload_model(
    s3_client: Any,
    bucket: str,
    prefix: str,
    *,
    config: dict[str, Any] | None = None,
    weights: bool = True,
    tokenizer: bool = True,
) -> str:
    """A Hugging Face model directory (config.json, tokenizer files, real safetensors); returns its URI."""
    for name, body in model_files(config=config, weights=weights, tokenizer=tokenizer).items():
        s3_client.upload_fileobj(io.BytesIO(body), bucket, f"{prefix}/{name}")
    return f"s3://{bucket}/{prefix}/"


def tar_gz(files: dict[str, bytes], *, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    """A model.tar.gz holding ``files`` (name -> bytes), then the ``extra`` members (links, devices)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        for info in extra or []:
            tar.addfile(info)
    return buffer.getvalue()


def upload_model_archive(s3_client: Any, bucket: str, key: str, body: bytes | None = None) -> str:
    """A model.tar.gz on S3 (by default the model_files() directory); returns its URI."""
    s3_client.put_object(Bucket=bucket, Key=key, Body=tar_gz(model_files()) if body is None else body)
    return f"s3://{bucket}/{key}"
