"""Base-model directories on S3 (SeaweedFS) for worker tests that never load the model."""

from __future__ import annotations

import io
import json
from typing import Any

import torch
from safetensors.torch import save

# Validation checks that these exist; nothing in these tests parses them.
TOKENIZER_FILES = {"tokenizer_config.json": b"{}", "tokenizer.json": b"{}"}


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
    config = config if config is not None else {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}
    s3_client.put_object(Bucket=bucket, Key=f"{prefix}/config.json", Body=json.dumps(config).encode())
    if tokenizer:
        for name, body in TOKENIZER_FILES.items():
            s3_client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=body)
    if weights:
        tensors = save({"model.embed_tokens.weight": torch.zeros(4, 2)})
        s3_client.upload_fileobj(io.BytesIO(tensors), bucket, f"{prefix}/model.safetensors")
    return f"s3://{bucket}/{prefix}/"
