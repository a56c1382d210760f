"""Batched serving: a continuous-batching engine with EAGLE-3 speculative decoding and an
OpenAI-compatible HTTP front.

    engine = ServingEngine(target, head, max_batch_size=8)
    tokens = engine.generate(GenerationRequest(prompt_ids, max_new_tokens=64))
"""

from serving.engine import ServingEngine
from serving.requests import GenerationRequest, RequestHandle, TokenEvent
from serving.server import load_engine, start_server
from serving.speculation import AdaptiveSpeculation, FixedSpeculation

__all__ = [
    "AdaptiveSpeculation",
    "FixedSpeculation",
    "GenerationRequest",
    "RequestHandle",
    "ServingEngine",
    "TokenEvent",
    "load_engine",
    "start_server",
]
