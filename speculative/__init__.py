"""Speculative decoding engine: an EAGLE-3 head drafting for a target model, verified
losslessly (greedy or speculative sampling), plus plain decoding on the same engine.

    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=4)
    result = decoder.generate(prompt_ids, max_new_tokens=128)
    baseline = decoder.generate_plain(prompt_ids, max_new_tokens=128)
"""

from engine.sampling import SamplingParams
from speculative.decoder import SpeculativeDecoder
from speculative.result import GenerationResult, acceptance_by_position

__all__ = ["GenerationResult", "SamplingParams", "SpeculativeDecoder", "acceptance_by_position"]
