"""Speculative decoding with an EAGLE-3 head, and plain decoding on the same engine.

One round of speculative decoding (batch 1):

1. The head turns the target features it has not seen yet (the prompt after the
   prefill, the accepted positions after a verification) into cache entries and drafts
   K tokens as a chain.
2. One target forward over [pending token, K drafts] scores every draft at once and
   captures the features of those positions.
3. Greedy or speculative-sampling verification keeps the first ``a`` drafts and adds
   one token of the target's own; the target cache forgets the K - a rejected positions.

Output is what plain decoding gives: token for token under greedy decoding (up to
floating-point differences between scoring K+1 positions at once and one at a time),
in distribution under sampling.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from engine.capture import check_aux_layer_ids, decoder_layers
from engine.drafting.batch_draft import SlotDrafter
from engine.drafting.draft import Drafter
from engine.drafting.tree_draft import TreeShape, propose_tree
from engine.heads.draft_precision import draft_dtype
from engine.heads.model import Eagle3DraftModel
from engine.packed_linear import pack_linear_layers, packing_available
from engine.sampling import SamplingParams, probabilities, sample
from engine.slot_target_runner import SlotTargetRunner, slot_runner_wanted
from engine.target import TargetOutput, TargetRunner
from engine.transfers import int_tables_to
from speculative.phase_clock import PhaseClock
from speculative.result import GenerationResult
from speculative.sequence import SequenceState
from speculative.verification import greedy_verdicts, read_verdict_and_drafts, sampled_verdicts

logger = logging.getLogger(__name__)

Runner = TargetRunner | SlotTargetRunner


class SpeculativeDecoder:
    """Decodes one sequence at a time with ``target`` and, if given, an EAGLE-3 ``head``.

    The head is moved to the target's device, in the target's dtype (a float32 head next to a
    bfloat16 target would spend its time converting) except beside a float32 target on a CPU
    with native bfloat16, where it drafts in bfloat16 (``engine.heads.draft_precision``);
    ``head_dtype`` chooses another.
    ``eos_token_ids`` defaults to the target's generation config. ``pack_weights`` (default:
    on a CPU with oneDNN) swaps the linear layers of target and head in place for
    oneDNN-packed ones (see ``packed_linear``); the models are then for inference only.
    """

    def __init__(
        self,
        target: PreTrainedModel,
        head: Eagle3DraftModel | None = None,
        *,
        num_speculative_tokens: int = 4,
        eos_token_ids: Iterable[int] | None = None,
        pack_weights: bool | None = None,
        slot_pool: bool | None = None,
        head_dtype: torch.dtype | None = None,
    ) -> None:
        if num_speculative_tokens < 1:
            raise ValueError(f"num_speculative_tokens must be at least 1, got {num_speculative_tokens}")
        self.target = target.eval()  # type: ignore[no-untyped-call]
        self.device = target.device
        self.num_speculative_tokens = num_speculative_tokens
        self.eos_token_ids = frozenset(eos_token_ids if eos_token_ids is not None else _eos_of(target))
        self.vocab_size = int(target.config.get_text_config().vocab_size)
        self.head: Eagle3DraftModel | None = None
        self._drafter: Drafter | SlotDrafter | None = None
        aux_layer_ids: list[int] | None = None
        # On a GPU, chains and plain decoding run on slot pools with CUDA graphs (lossless
        # as vLLM's verification is); elsewhere the exact runner and drafter keep output
        # bit-for-bit plain greedy decoding's. Recurrent targets need the exact runner's
        # state rollback.
        slots = slot_runner_wanted(target, slot_pool)
        if head is not None:
            _check_head_fits(head, target, self.vocab_size)
            dtype = head_dtype or draft_dtype(target.dtype, self.device)
            self.head = head.to(device=self.device, dtype=dtype).eval()
            self._drafter = (SlotDrafter if slots else Drafter)(self.head, self.vocab_size)
            aux_layer_ids = head.config.aux_layer_ids
        if pack_weights if pack_weights is not None else packing_available(self.device):
            pack_linear_layers(self.target)
            if self.head is not None:
                pack_linear_layers(self.head)
        self._target: Runner = (
            SlotTargetRunner(target, aux_layer_ids) if slots else TargetRunner(target, aux_layer_ids)
        )
        self._tree_fallback_logged = False

    @property
    def head_dtype(self) -> torch.dtype | None:
        """The dtype the head drafts in (None without a head)."""
        return None if self.head is None else self.head.dtype

    def generate(
        self,
        prompt_ids: Sequence[int] | torch.Tensor,
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        num_speculative_tokens: int | None = None,
        tree: TreeShape | None = None,
    ) -> GenerationResult:
        """Speculative decoding; plain decoding when the decoder has no head.

        ``num_speculative_tokens`` overrides the decoder's K for this call. With ``tree``
        the head drafts a tree of that shape instead of a chain of K (greedy only: the
        tree's verification accepts the path greedy decoding takes); a target with
        sliding-window layers drafts a chain of the tree's depth instead (logged once).
        """
        if self._drafter is None:
            return self.generate_plain(
                prompt_ids, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed
            )
        k = self.num_speculative_tokens if num_speculative_tokens is None else num_speculative_tokens
        if k < 1:
            raise ValueError(f"num_speculative_tokens must be at least 1, got {k}")
        params = SamplingParams(temperature=temperature, top_p=top_p)
        if tree is not None:
            if not params.greedy:
                raise ValueError("tree drafting verifies greedily; use chain drafting for temperature > 0")
            reason = self._target.tree_unsupported_reason()
            if reason is not None:
                # Same verified depth, one branch: output is still the target's greedy output.
                if not self._tree_fallback_logged:
                    logger.warning("tree %s falls back to a chain of %d drafts: %s", tree, tree.depth, reason)
                    self._tree_fallback_logged = True
                k, tree = tree.depth, None
        sequence = self._sequence(prompt_ids, max_new_tokens)
        generator = None if params.greedy else self._generator(seed)
        with torch.inference_mode():
            return self._speculate(sequence, self._drafter, k if tree is None else tree, params, generator)

    def generate_plain(
        self,
        prompt_ids: Sequence[int] | torch.Tensor,
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> GenerationResult:
        """One target forward per token: the baseline a speedup is measured against."""
        params = SamplingParams(temperature=temperature, top_p=top_p)
        sequence = self._sequence(prompt_ids, max_new_tokens)
        generator = None if params.greedy else self._generator(seed)
        with torch.inference_mode():
            return self._decode_plain(sequence, params, generator)

    def _decode_plain(
        self, sequence: SequenceState, params: SamplingParams, generator: torch.Generator | None
    ) -> GenerationResult:
        started = time.perf_counter()
        with self._target.session(capture=False) as target:
            output = target.forward(self._ids(sequence.prompt_ids), logits_to_keep=1)
            sequence.emit([self._pick(output.logits[-1], params, generator)])
            prefilled = time.perf_counter()
            forwards = 1
            while not sequence.finished:
                output = target.forward(self._ids([sequence.last_token]), logits_to_keep=1)
                sequence.emit([self._pick(output.logits[-1], params, generator)])
                forwards += 1
        finished = time.perf_counter()
        return GenerationResult(
            token_ids=sequence.new_token_ids,
            prompt_length=len(sequence.prompt_ids),
            finish_reason=sequence.finish_reason or "length",
            num_speculative_tokens=0,
            num_target_forwards=forwards,
            seconds=finished - started,
            prefill_seconds=prefilled - started,
            target_seconds=finished - prefilled,
        )

    def _speculate(
        self,
        sequence: SequenceState,
        drafter: Drafter | SlotDrafter,
        drafting: int | TreeShape,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> GenerationResult:
        """``drafting`` is K for a chain, or the shape of a draft tree."""
        started = time.perf_counter()
        result = GenerationResult(
            token_ids=sequence.new_token_ids,
            prompt_length=len(sequence.prompt_ids),
            finish_reason="length",
            num_speculative_tokens=drafting if isinstance(drafting, int) else drafting.depth,
            num_target_forwards=1,
        )
        run = _Run(sequence, params, generator, result, PhaseClock(self.device))
        with self._target.session(capture=True) as target, drafter.session():
            output = target.forward(self._ids(sequence.prompt_ids), logits_to_keep=1)
            sequence.emit([self._pick(output.logits[-1], params, generator)])
            target.enable_rollback()
            unseen = _features(output)  # target features the head has no cache entries for yet
            result.prefill_seconds = time.perf_counter() - started
            while not sequence.finished:
                num_drafts = min(result.num_speculative_tokens, sequence.remaining - 1)
                if num_drafts == 0:  # one token left: nothing to speculate on
                    self._last_step(run, target)
                elif isinstance(drafting, TreeShape):
                    # Trees run on the exact runner only (``generate`` falls back to a chain),
                    # whose drafter is a ``Drafter``.
                    assert isinstance(drafter, Drafter)
                    unseen = self._tree_round(run, target, drafter, unseen, drafting.limited_to(num_drafts))
                else:
                    unseen = self._round(run, target, drafter, unseen, num_drafts)
        result.draft_seconds, verify_seconds = run.clock.totals()
        result.target_seconds += verify_seconds  # besides a last step's plain forward
        result.finish_reason = sequence.finish_reason or "length"
        result.seconds = time.perf_counter() - started
        return result

    def _round(
        self,
        run: _Run,
        target: Runner,
        drafter: Drafter | SlotDrafter,
        unseen: torch.Tensor,
        num_drafts: int,
    ) -> torch.Tensor:
        """Draft, verify, keep the accepted tokens; returns the features the head has not seen."""
        sequence, result = run.sequence, run.result
        run.clock.mark()  # drafting starts
        # The head's entries lag the target by the positions accepted last round.
        next_ids = sequence.tokens_in(drafter.length + 1, target.length + 1)
        proposal = drafter.propose(
            unseen, next_ids, num_tokens=num_drafts, params=run.params, generator=run.generator
        )
        run.clock.mark()  # verification starts
        candidates = torch.cat([self._ids([sequence.last_token])[0], proposal.token_ids])
        output = target.forward(candidates.unsqueeze(0), logits_to_keep=num_drafts + 1)
        verdict, accepted_ids = read_verdict_and_drafts(
            self._verify(proposal.token_ids, proposal.probs, output.logits, run.params, run.generator),
            proposal.token_ids,
        )
        target.rollback(num_drafts - verdict.accepted)
        sequence.emit([*accepted_ids, verdict.next_token])
        result.accepted_per_step.append(verdict.accepted)
        result.proposed_per_step.append(num_drafts)
        result.verified_tokens += num_drafts + 1
        result.num_target_forwards += 1
        run.clock.mark()  # the round ends
        return _features(output)[: verdict.accepted + 1]

    def _tree_round(
        self, run: _Run, target: Runner, drafter: Drafter, unseen: torch.Tensor, shape: TreeShape
    ) -> torch.Tensor:
        """``_round`` with a draft tree: the target scores every node in one forward and keeps
        the greedy path through it (see ``engine.drafting.tree``)."""
        sequence, result = run.sequence, run.result
        run.clock.mark()  # drafting starts
        next_ids = self._ids(sequence.tokens_in(drafter.length + 1, target.length + 1))[0]
        tree = propose_tree(drafter, unseen, next_ids, shape)
        run.clock.mark()  # verification starts
        cached = target.length
        candidates = torch.cat([self._ids([sequence.last_token])[0], tree.token_ids])
        output = target.forward(
            candidates.unsqueeze(0),
            logits_to_keep=tree.size + 1,
            attention_mask=tree.verification_mask(cached),
            position_ids=tree.position_ids(cached),
        )
        path, next_token = tree.greedy_path(output.logits.argmax(dim=-1))
        kept_rows = [0, *(node + 1 for node in path)]
        target.keep(cached + 1, [cached + row for row in kept_rows[1:]])
        sequence.emit([*tree.token_ids[path].tolist(), next_token])
        result.accepted_per_step.append(len(path))
        result.proposed_per_step.append(tree.depth)
        result.verified_tokens += tree.size + 1
        result.num_target_forwards += 1
        run.clock.mark()  # the round ends
        return _features(output)[kept_rows]

    def _last_step(self, run: _Run, target: Runner) -> None:
        started = time.perf_counter()
        output = target.forward(self._ids([run.sequence.last_token]), logits_to_keep=1)
        run.sequence.emit([self._pick(output.logits[-1], run.params, run.generator)])
        run.result.num_target_forwards += 1
        run.result.target_seconds += time.perf_counter() - started

    @staticmethod
    def _verify(
        draft_ids: torch.Tensor,
        draft_probs: torch.Tensor | None,
        target_logits: torch.Tensor,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """The round's verdict [1, 2] on the device, read back with the drafts it accepts."""
        if params.greedy:
            return greedy_verdicts([draft_ids], [target_logits])
        if draft_probs is None or generator is None:
            raise RuntimeError("sampled verification needs the draft distributions and a generator")
        target_probs = probabilities(target_logits, params)
        return sampled_verdicts([draft_ids], [draft_probs], [target_probs], [generator])

    @staticmethod
    def _pick(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
        if params.greedy:
            return int(logits.argmax())
        if generator is None:
            raise RuntimeError("sampling needs a generator")
        return int(sample(probabilities(logits, params), generator))

    def _ids(self, token_ids: list[int]) -> torch.Tensor:
        """[1, len] on the device, through pinned memory: queued behind the drafts a round has
        just launched on a GPU, where torch.tensor(..., device=) would wait for them to run."""
        (ids,) = int_tables_to(self.device, token_ids)
        return ids.view(1, -1)

    def _generator(self, seed: int | None) -> torch.Generator:
        generator = torch.Generator(device=self.device)
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(seed)
        return generator

    def _sequence(self, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int) -> SequenceState:
        ids = _as_id_list(prompt_ids)
        bad = [token for token in ids if not 0 <= token < self.vocab_size]
        if bad:
            raise ValueError(
                f"prompt_ids contains ids outside the vocabulary 0..{self.vocab_size - 1}: {bad[:5]}"
            )
        return SequenceState(ids, max_new_tokens=max_new_tokens, eos_token_ids=self.eos_token_ids)


@dataclass(slots=True)
class _Run:
    """State of one speculative ``generate`` call."""

    sequence: SequenceState
    params: SamplingParams
    generator: torch.Generator | None
    result: GenerationResult
    clock: PhaseClock  # splits each round between drafting and verification


def _features(output: TargetOutput) -> torch.Tensor:
    if output.aux_hidden_states is None:
        raise RuntimeError("the target forward captured no features")
    return output.aux_hidden_states


def _as_id_list(prompt_ids: Sequence[int] | torch.Tensor) -> list[int]:
    if isinstance(prompt_ids, torch.Tensor):
        if prompt_ids.dim() == 2 and prompt_ids.shape[0] == 1:
            prompt_ids = prompt_ids[0]
        if prompt_ids.dim() != 1:
            raise ValueError(
                f"prompt_ids must be [T] or [1, T] (batch 1), got shape {tuple(prompt_ids.shape)}"
            )
        return [int(token) for token in prompt_ids.tolist()]
    return [int(token) for token in prompt_ids]


def _eos_of(target: PreTrainedModel) -> list[int]:
    eos = getattr(target.generation_config, "eos_token_id", None)
    if eos is None:
        eos = getattr(target.config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, int) else [int(token) for token in eos]


def _check_head_fits(head: Eagle3DraftModel, target: PreTrainedModel, vocab_size: int) -> None:
    """Refuse a head trained for another target: its features and ids would be garbage."""
    config = head.config
    text = target.config.get_text_config()
    if config.vocab_size != vocab_size:
        raise ValueError(f"head vocab_size {config.vocab_size} != target vocabulary size {vocab_size}")
    if config.target_hidden_size != text.hidden_size:
        raise ValueError(
            f"head target_hidden_size {config.target_hidden_size} != target hidden_size {text.hidden_size}"
        )
    check_aux_layer_ids(config.aux_layer_ids, len(decoder_layers(target)))
