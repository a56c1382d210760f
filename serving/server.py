"""Load a target (and head) from directories and serve them over HTTP in this process."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import uvicorn
from transformers import AutoTokenizer

from serving.engine import ServingEngine
from serving.http import create_app
from serving.speculation import AdaptiveSpeculation, FixedSpeculation, SpeculationPolicy
from trainer.device import load_causal_lm, model_dtype

logger = logging.getLogger(__name__)

_STARTUP_TIMEOUT_SECONDS = 60.0


def speculation_policy(
    *, has_head: bool, num_speculative_tokens: int | None, adaptive: bool
) -> SpeculationPolicy:
    """Fixed K when given; adaptive K when asked or when a head comes without a K."""
    if num_speculative_tokens is not None and adaptive:
        raise ValueError("give either num_speculative_tokens or adaptive, not both")
    if not has_head:
        if adaptive or (num_speculative_tokens or 0) > 0:
            raise ValueError("speculative decoding needs a draft head (--head)")
        return FixedSpeculation(0)
    if num_speculative_tokens is not None:
        return FixedSpeculation(num_speculative_tokens)
    return AdaptiveSpeculation()


def load_engine(
    model_dir: Path,
    head_dir: Path | None = None,
    *,
    num_speculative_tokens: int | None = None,
    adaptive: bool = False,
    max_batch_size: int = 8,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    on_device_failure: Callable[[str], None] | None = None,
) -> ServingEngine:
    """The engine for a target (and head) directory; weights and KV caches on ``device`` (default
    CPU), in ``dtype`` (default: float32 on CPU, bfloat16 on a GPU that supports it)."""
    # Imported here: the head loader pulls in the validation stack, needed only with a head.
    from engine.heads.export import load_head  # noqa: PLC0415

    if not model_dir.is_dir():
        raise ValueError(f"model directory {model_dir} does not exist")
    if head_dir is not None and not head_dir.is_dir():
        raise ValueError(f"head directory {head_dir} does not exist")
    policy = speculation_policy(
        has_head=head_dir is not None, num_speculative_tokens=num_speculative_tokens, adaptive=adaptive
    )
    device = device or torch.device("cpu")
    target = load_causal_lm(model_dir, device=device, dtype=dtype or model_dtype(device))
    head = load_head(head_dir, target) if head_dir is not None else None
    return ServingEngine(
        target, head, speculation=policy, max_batch_size=max_batch_size, on_device_failure=on_device_failure
    )


@contextmanager
def start_server(
    model_dir: Path | str,
    head_dir: Path | str | None = None,
    *,
    num_speculative_tokens: int | None = None,
    adaptive: bool = False,
    max_batch_size: int = 8,
    host: str = "127.0.0.1",
    port: int = 0,
    served_model_name: str | None = None,
    device: torch.device | None = None,
    on_device_failure: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Serve until the block ends; yields the base URL (``port=0`` picks a free port).

    ``on_device_failure(reason)`` is called (on the engine's thread) when a failed step left the
    device unable to run another: the server then answers every request, and /health, with 503,
    and the process should exit so that whatever runs it starts a new one."""
    model_dir = Path(model_dir)
    engine = load_engine(
        model_dir,
        Path(head_dir) if head_dir is not None else None,
        num_speculative_tokens=num_speculative_tokens,
        adaptive=adaptive,
        max_batch_size=max_batch_size,
        device=device,
        on_device_failure=on_device_failure,
    )
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        # The model's window, or on a GPU the slot pool's if that is shorter: a request is
        # refused up front rather than failing its batch once it outgrows the pool.
        max_model_len = engine.max_model_len
        if max_model_len is None:
            raise ValueError(f"{model_dir}: the model's config names no max_position_embeddings")
        app = create_app(
            engine,
            tokenizer,
            model_name=served_model_name or model_dir.resolve().name,
            max_model_len=max_model_len,
        )
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, name="eaglenest-http", daemon=True)
        thread.start()
        try:
            bound = _wait_until_started(server, thread)
            yield f"http://{host}:{bound}"
        finally:
            server.should_exit = True
            thread.join()
    finally:
        engine.close()


def _wait_until_started(server: uvicorn.Server, thread: threading.Thread) -> int:
    deadline = time.monotonic() + _STARTUP_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive():
            raise OSError("the HTTP server failed to start (is the port already in use?)")
        if time.monotonic() > deadline:
            raise OSError(f"the HTTP server did not start within {_STARTUP_TIMEOUT_SECONDS:.0f} s")
        time.sleep(0.02)
    return int(server.servers[0].sockets[0].getsockname()[1])
