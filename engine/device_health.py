"""Whether a device can run anything more after a step failed on it.

Most errors leave the device as it was (a CPU's always; on a GPU an out-of-memory error, a
shape error caught before launch): the next step may succeed. A CUDA error raised by a kernel
(an illegal memory access, a device-side assert such as an index out of range) is sticky
instead: the process's CUDA context is broken, and every later launch, copy and sync on it
fails. A server that went on would fail every request while it still looked alive; only a new
process recovers.
"""

from __future__ import annotations

import torch


def device_fault(device: torch.device) -> str | None:
    """Why ``device`` can run no further work, or None when it can (always None on a CPU).

    On CUDA a sync returns the context's sticky error, if it holds one."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
    except Exception as error:  # RuntimeError, or torch.AcceleratorError in newer torch
        return f"{type(error).__name__}: {error}"
    return None
