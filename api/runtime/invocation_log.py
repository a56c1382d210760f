"""One invocation as the runtime records it once it ended: per-endpoint metrics (and data capture)."""

from __future__ import annotations

from dataclasses import dataclass

from api.runtime.payloads import ModelCall
from api.runtime.targets import Target


@dataclass(frozen=True)
class Invocation:
    target: Target
    call: ModelCall
    request_body: bytes
    started: float  # time.perf_counter() when the request arrived
    content_type: str = "application/json"
