"""The dtype a draft head runs in beside its target.

A float32 target's head drafts in bfloat16 on a CPU with native bfloat16 instructions
(AVX512-BF16 or AMX). Each draft step reads all of the head's weights, and the target's
forward in between evicts them from the caches, so a step streams them from memory; bfloat16
halves those bytes. On a 2-core AVX512-BF16 EPYC a SmolLM2 head's step alone (one decoder
layer and an 8,192-token lm_head over oneDNN-packed weights, 100 cached positions) took 0.87 ms
against 1.74 ms in float32, and a K=3 round inside decoding 4.1-4.3 ms against 5.6-5.7
(`benchmarks/draft_precision.py` measures the latter on any machine).

What the head computes only decides which tokens are proposed: the target verifies every
one, so outputs stay exactly what plain decoding gives. Its keys and values stay float32
(``engine.kv_pool.pool_dtype``: the CPU's attention kernel is slower in bfloat16) and its
logits are chosen from in float32.

Elsewhere the head runs in its target's dtype: on a GPU a bfloat16 target's head is already
bfloat16, and a CPU without native bfloat16 would emulate it.
"""

from __future__ import annotations

import torch


def native_cpu_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX tiles)."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def draft_dtype(target_dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype a head drafts in next to a target of ``target_dtype`` on ``device``."""
    if device.type == "cpu" and target_dtype == torch.float32 and native_cpu_bfloat16():
        return torch.bfloat16
    return target_dtype
