"""An untrained EAGLE-3 head for a target: the worst head a server can be given.

Used where a head must exist but must not be any good: the benchmark that checks adaptive K
never slows serving down (benchmarks/never_slower.py) and tests of an "existing head".
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from engine.heads.config import Eagle3HeadConfig
from engine.heads.export import export_head, new_head
from engine.heads.peagle import PEagleHeadConfig, default_mask_token_id


def write_random_head(
    target_dir: Path, out_dir: Path, *, draft_vocab_size: int, seed: int = 1, variant: str = "eagle3"
) -> Path:
    """A randomly initialised head for ``target_dir``, exported in the native format
    (``variant`` peagle: a P-EAGLE head)."""
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    config = Eagle3HeadConfig.from_target(target.config, draft_vocab_size=draft_vocab_size)
    if variant == "peagle":
        config = PEagleHeadConfig(**config.model_dump(), mask_token_id=default_mask_token_id(target.config))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = new_head(config)
    t2d = torch.zeros(config.vocab_size, dtype=torch.bool)
    t2d[:draft_vocab_size] = True  # the lowest ids: any valid draft vocabulary will do
    head.set_draft_vocab(torch.zeros(draft_vocab_size, dtype=torch.long), t2d)
    head.load_target_embeddings(target.get_input_embeddings().weight.detach())  # type: ignore[operator]
    return export_head(head, out_dir)
