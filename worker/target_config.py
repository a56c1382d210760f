"""A transformers config object from a model's config.json, without downloading the weights."""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig, PretrainedConfig


def target_config_from_dict(raw: dict[str, Any]) -> PretrainedConfig:
    """The architecture's own config class when transformers knows ``model_type``, else a
    generic one (enough to name an unsupported architecture in an error)."""
    model_type = raw.get("model_type")
    if isinstance(model_type, str):
        try:
            settings = {key: value for key, value in raw.items() if key != "model_type"}
            config: PretrainedConfig = AutoConfig.for_model(model_type, **settings)
            return config
        except (ValueError, KeyError, TypeError):
            pass
    return PretrainedConfig.from_dict(raw)
