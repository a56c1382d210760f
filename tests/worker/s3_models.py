"""Base-model directories on S3 (SeaweedFS) for worker tests."""

from __future__ import annotations

import io
import json
from typing import Any

import torch
from safetensors.torch import save


def upload_model(s3_client: Any, bucket: str, prefix: str, *, config: dict[str, Any] | None = None) -> str:
    """A minimal Hugging Face model directory (config.json + real safetensors); returns its S3 URI."""
    config = config if config is not None else {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}
    s3_client.put_object(Bucket=bucket, Key=f"{prefix}/config.json", Body=json.dumps(config).encode())
    weights = save({"model.embed_tokens.weight": torch.zeros(4, 2)})
    s3_client.upload_fileobj(io.BytesIO(weights), bucket, f"{prefix}/model.safetensors")
    return f"s3://{bucket}/{prefix}/"
