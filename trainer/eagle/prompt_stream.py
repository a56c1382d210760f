"""The target's self-instruct prompts, written one distillation chunk at a time as they are needed.

Under a budget, a prompt written but never answered is budget spent on nothing. Writing them
all first, for a fixed share of the budget, wasted much of that share whenever answering cost
more than the share assumed: the nineteenth shipped build (chat openings, 20 % of 100 minutes
for new data, AVX512-BF16 VM) wrote 3,176 prompts in the third of its data time set aside for
them (2,400 kept) and answered 1,003, because a 128-token reply cost about five times what a
prompt did there (the share was set where it cost twice). As a stream, prompts are written a
round (one distillation chunk) at a time, when distillation reaches them, so the budget splits
itself between writing and answering on any machine and recipe, and at most one round is left
unanswered when it runs out.

Each round is seeded on its own (the run's prompt seed plus the round number), so the stream
holds the same prompts however fast it is read: a fanned-out job's plan, which writes every
round up front, lists exactly the prompts a single run writes as it goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from engine.runner_cache import RunnerCache
from trainer.config import TrainConfig
from trainer.data.schema import Conversation
from trainer.data.split import content_key
from trainer.eagle.distillation import chunk_size
from trainer.eagle.prompt_openings import openings_for
from trainer.eagle.reporting import Stage
from trainer.eagle.self_instruct import SelfInstructResult, synthesize_prompts

# Self-instruct samples with its own seed stream: adding it leaves the data's regeneration as it was.
SELF_INSTRUCT_SEED_OFFSET = 7919


@dataclass
class PromptStream:
    """Iterate for the prompts; ``written`` counts every round written so far."""

    config: TrainConfig
    generator: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    # Origins earlier runs distilled: a prompt among them is dropped ("already_distilled"),
    # and their number moves the seed on, so a run after others writes new prompts.
    answered: frozenset[str]
    report: Callable[[Stage, int, int], None]
    should_stop: Callable[[], bool]
    written: SelfInstructResult = field(default_factory=lambda: SelfInstructResult(conversations=[]))

    def __iter__(self) -> Iterator[Conversation]:
        count = self.config.self_instruct_conversations
        seed = self.config.seed + SELF_INSTRUCT_SEED_OFFSET + len(self.answered)
        seen: set[str] = set()  # every round's prompts: a later round's repeat is a duplicate
        kept = 0  # prompts the writer kept, those earlier runs answered included
        self.report("writing_prompts", 0, count)
        round_number = 0
        # One slot pool (and its CUDA graphs) for every round, kept while distillation answers
        # a round's prompts with its own.
        with RunnerCache(self.generator) as runners:
            while kept < count and not self.should_stop():
                asked = min(chunk_size(self.config, self.generator.device), count - kept)
                written = self._write_round(seed + round_number, asked, kept, seen, runners)
                got = len(written.conversations)
                kept += got
                fresh = [c for c in written.conversations if content_key(c) not in self.answered]
                if len(fresh) < got:
                    written.dropped["already_distilled"] += got - len(fresh)
                    written.conversations = fresh
                self.written.add(written)
                yield from fresh
                if written.stopped or got < asked:
                    # Stopped, or the writer gave up on this round (a model that mostly loops:
                    # synthesize_prompts' attempts ran out): a next round would fare no better.
                    return
                round_number += 1

    def _write_round(
        self, seed: int, asked: int, kept_before: int, seen: set[str], runners: RunnerCache
    ) -> SelfInstructResult:
        config = self.config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return synthesize_prompts(
                self.generator,
                self.tokenizer,
                asked,
                temperature=config.self_instruct_temperature,
                top_p=config.self_instruct_top_p,
                max_prompt_tokens=config.self_instruct_max_prompt_tokens,
                batch_size=config.generation_rows(self.generator.device),
                openings=openings_for(config.self_instruct_openings),
                should_stop=self.should_stop,
                progress=lambda done: self.report(
                    "writing_prompts", kept_before + done, config.self_instruct_conversations
                ),
                seen=seen,
                runners=runners,
            )

    def summary(self) -> dict[str, object]:
        """What lineage records of the prompts written so far (DataStats.self_instruct)."""
        config = self.config
        return self.written.summary(
            temperature=config.self_instruct_temperature,
            top_p=config.self_instruct_top_p,
            max_prompt_tokens=config.self_instruct_max_prompt_tokens,
            openings=config.self_instruct_openings,
        )
