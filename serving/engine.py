"""Continuous-batching serving engine with EAGLE-3 speculative decoding.

One background thread owns the models and runs steps; any thread submits requests.
Each step:

1. Requests waiting in the queue join, up to ``max_batch_size``; finished or cancelled
   ones have left after the previous step.
2. The speculation policy picks K for this batch size. Every prefilled sequence with a
   head drafts up to K tokens (fewer near its ``max_new_tokens``) from its own draft
   slot of one pool; the head runs once per chain step for all of them
   (``engine.drafting.batch_draft.BatchDrafter``).
3. One target forward over the packed new tokens of every sequence: a joining
   sequence's prompt, the others' pending token plus their drafts
   (``engine.packed_target``; ``engine.slot_target`` on a GPU, which takes the drafts
   on the device unread, so the host queues this forward while the head still runs). A
   target with linear-attention layers (Qwen3-Next) cannot share a packed row's recurrent
   state, so it runs one batch-1 forward per sequence instead (``engine.recurrent_target``).
4. Every sequence is verified on the device, greedy ones together and sampled ones by
   speculative sampling with their own generators, and the verdicts are read back with
   the drafts in one host sync (``speculative.verification``): on the slot pool, the
   step's only read.
   Each keeps its accepted prefix plus the target's token and crops its KV cache by the
   drafts it rejected: acceptance is ragged.

Without a head (or with K = 0) it is plain decoding on the same engine, the baseline a
speedup is measured against. Greedy output equals the target's plain greedy decoding of
each request alone (see ``packed_attention`` for why it is exact).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import TracebackType

import torch
from transformers import PreTrainedModel

from engine.cuda_graphs import CAPTURED
from engine.device_health import device_fault
from engine.drafting.batch_draft import BatchDrafter, DraftRequest
from engine.drafting.draft import Proposal
from engine.heads.draft_precision import draft_dtype
from engine.heads.model import Eagle3DraftModel
from engine.packed_linear import pack_linear_layers, packing_available
from engine.segments import Segment, SegmentOutput, SequenceCache, ServingTarget
from engine.serving_targets import sequence_limit, serving_target
from serving.metrics import EngineMetrics
from serving.requests import EventSink, GenerationRequest, RequestHandle, TokenEvent
from serving.speculation import AdaptiveSpeculation, FixedSpeculation, SpeculationPolicy
from serving.step_verification import RowVerdict, step_verdicts
from speculative.decoder import _check_head_fits, _eos_of
from speculative.sequence import SequenceState

logger = logging.getLogger(__name__)

# How often an idle engine thread wakes up to notice ``close``.
_IDLE_POLL_SECONDS = 0.1


@dataclass(slots=True)
class _Active:
    """A request in the batch."""

    handle: RequestHandle
    sequence: SequenceState
    cache: SequenceCache
    generator: torch.Generator | None
    draft_slot: int | None  # its slot of the head's key/value pool, when it drafts
    session: ExitStack = field(default_factory=ExitStack)
    unseen: torch.Tensor | None = None  # target features the head has no cache entries for yet
    prefilled: bool = False


class ServingEngine:
    """Serves many requests at once; ``submit`` from any thread, results via the handle.

    ``speculation`` defaults to adaptive K with a head and plain decoding without one.
    Like ``SpeculativeDecoder``, the engine packs the linear layers of target and head
    for oneDNN on a CPU and switches the target to packed attention: the models are
    the engine's from then on.
    """

    def __init__(
        self,
        target: PreTrainedModel,
        head: Eagle3DraftModel | None = None,
        *,
        speculation: SpeculationPolicy | None = None,
        max_batch_size: int = 8,
        eos_token_ids: Iterable[int] | None = None,
        pack_weights: bool | None = None,
        attention: str = "auto",
        on_device_failure: Callable[[str], None] | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        self.device = target.device
        self.vocab_size = int(target.config.get_text_config().vocab_size)
        self.eos_token_ids = frozenset(eos_token_ids if eos_token_ids is not None else _eos_of(target))
        self.max_batch_size = max_batch_size
        self.head: Eagle3DraftModel | None = None
        if head is not None:
            _check_head_fits(head, target, self.vocab_size)
            # In the target's dtype, or bfloat16 beside a float32 target on a CPU that has it.
            self.head = head.to(device=self.device, dtype=draft_dtype(target.dtype, self.device)).eval()
        self.speculation: SpeculationPolicy = speculation or (
            AdaptiveSpeculation() if head is not None else FixedSpeculation(0)
        )
        if self.speculation.max_tokens > 0 and self.head is None:
            raise ValueError("speculative decoding (K > 0) needs a draft head")
        if pack_weights if pack_weights is not None else packing_available(self.device):
            pack_linear_layers(target.eval())  # type: ignore[no-untyped-call]
            if self.head is not None:
                pack_linear_layers(self.head)
        aux_layer_ids = head.config.aux_layer_ids if head is not None else None
        self.target: ServingTarget = serving_target(
            target.eval(),  # type: ignore[no-untyped-call]
            aux_layer_ids,
            attention=attention,
            max_sequences=max_batch_size,
        )
        # The slot pool (what a GPU serves on) holds a fixed number of positions a sequence,
        # fewer than a long-context model's window (engine.runner.MAX_POOL_POSITIONS): a
        # request that outgrew it would fail its whole batch's step, so it is refused at submit.
        self.max_sequence_length = sequence_limit(self.target)
        context = getattr(target.config.get_text_config(), "max_position_embeddings", None)
        # What a sequence (prompt plus new tokens) may hold here: the model's window, capped by
        # the pool's. The HTTP server advertises and checks this one.
        self.max_model_len: int | None = min(
            (int(limit) for limit in (context, self.max_sequence_length) if limit is not None), default=None
        )
        self.drafter = (
            BatchDrafter(self.head, self.vocab_size, max_batch_size)
            if self.head is not None and self.speculation.max_tokens > 0
            else None
        )
        self.metrics = EngineMetrics(max_positions=self.speculation.max_tokens)
        self._no_drafts = torch.empty(0, dtype=torch.long, device=self.device)
        self._queue: queue.Queue[RequestHandle] = queue.Queue()
        self._active: list[_Active] = []
        self._stopping = threading.Event()
        self._closed = False
        # Set when a failed step left the device unable to run another (engine.device_health):
        # the engine stops, /health reports it and ``on_device_failure`` tells the process.
        self.device_failure: str | None = None
        self._on_device_failure = on_device_failure
        self._thread = threading.Thread(target=self._run, name="eaglenest-engine", daemon=True)
        self._thread.start()

    # --- client side -------------------------------------------------------------------

    def submit(self, request: GenerationRequest, on_event: EventSink | None = None) -> RequestHandle:
        if self._stopping.is_set():
            raise RuntimeError(self.device_failure or "the serving engine is closed")
        bad = [token for token in request.prompt_ids if not 0 <= token < self.vocab_size]
        if bad:
            raise ValueError(
                f"prompt contains ids outside the vocabulary 0..{self.vocab_size - 1}: {bad[:5]}"
            )
        wanted = len(request.prompt_ids) + request.max_new_tokens
        if self.max_sequence_length is not None and wanted > self.max_sequence_length:
            raise ValueError(
                f"the prompt's {len(request.prompt_ids)} tokens plus max_new_tokens "
                f"{request.max_new_tokens} exceed the {self.max_sequence_length} positions a "
                "sequence holds in the serving pool"
            )
        handle = RequestHandle(request, on_event)
        self._queue.put(handle)
        self.metrics.waiting.set(self._queue.qsize())
        return handle

    def generate(self, request: GenerationRequest, timeout: float | None = None) -> list[int]:
        """Submit and wait: the new token ids."""
        return self.submit(request).wait(timeout)

    def close(self) -> None:
        """Stop the engine thread, then let go of the models, their KV caches and graphs.

        The engine object itself may outlive this: FastAPI keeps the endpoint functions of
        ``serving.http.create_app``, which close over it, in module-level caches. A process that
        serves one model after another (a job's benchmark) would otherwise hold every one of
        them until it exits; on a GPU, a copy of the target per server until memory runs out."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        self._thread.join()
        if self.device_failure is None:  # a failed device's frees would raise again: only drop them
            self.target.close()
        self.drafter = None
        self.head = None
        self._active = []
        del self.target

    def __enter__(self) -> ServingEngine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- engine thread -----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._admit()
            if not self._active:
                continue
            try:
                with torch.inference_mode():
                    self._step()
            except Exception as exc:  # one bad step must not take the server down
                logger.exception(
                    "engine step failed; failing the %d requests in the batch", len(self._active)
                )
                for active in self._active:
                    self._finish(active, TokenEvent([], "error", error=f"{type(exc).__name__}: {exc}"))
                if (fault := device_fault(self.device)) is not None:
                    self._device_failed(fault)
            self._retire()
        reason = self.device_failure or "the engine was closed"
        for active in self._active:
            self._finish(active, TokenEvent([], "cancelled", error=reason))
        while not self._queue.empty():
            self._queue.get_nowait().deliver(TokenEvent([], "cancelled", error=reason))

    def _device_failed(self, fault: str) -> None:
        """Stop for good: the device cannot run another step, so every later request would fail."""
        self.device_failure = f"the serving device {self.device} failed and runs nothing more ({fault})"
        logger.error("%s; the engine stops", self.device_failure)
        self._stopping.set()
        if self._on_device_failure is not None:
            self._on_device_failure(self.device_failure)

    def _admit(self) -> None:
        """Move queued requests into the batch; waits a little when there is nothing to do."""
        while len(self._active) < self.max_batch_size:
            try:
                handle = (
                    self._queue.get(timeout=_IDLE_POLL_SECONDS)
                    if not self._active
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                break
            if handle.cancelled.is_set():
                handle.deliver(TokenEvent([], "cancelled"))
                continue
            self._active.append(self._activate(handle))
        self.metrics.waiting.set(self._queue.qsize())
        self.metrics.running.set(len(self._active))

    def _activate(self, handle: RequestHandle) -> _Active:
        request = handle.request
        generator = None
        if not request.sampling.greedy:
            generator = torch.Generator(device=self.device)
            if request.seed is None:
                generator.seed()
            else:
                generator.manual_seed(request.seed)
        sequence = SequenceState(
            list(request.prompt_ids),
            max_new_tokens=request.max_new_tokens,
            eos_token_ids=frozenset() if request.ignore_eos else self.eos_token_ids,
        )
        active = _Active(handle, sequence, self.target.new_cache(), generator, draft_slot=None)
        if self.drafter is not None:
            active.draft_slot = self.drafter.slots.acquire()
            active.session.callback(self.drafter.slots.release, active.draft_slot)
        return active

    def _step(self) -> None:
        started, captures = time.perf_counter(), CAPTURED.captures
        # A step that prefills a joining prompt costs what the prompt costs, not what K does.
        decoding_only = all(active.prefilled for active in self._active)
        batch_size = len(self._active)
        k = self.speculation.num_tokens(batch_size) if self.head is not None else 0
        proposals = self._draft(k)
        segments = [
            self._segment(active, proposal) for active, proposal in zip(self._active, proposals, strict=True)
        ]
        outputs = self.target.forward(segments)
        verdicts = step_verdicts(
            proposals,
            outputs,
            [active.handle.request.sampling for active in self._active],
            [active.generator for active in self._active],
            no_drafts=self._no_drafts,
            vocab_size=self.vocab_size,
        )
        for active, proposal, output, verdict in zip(self._active, proposals, outputs, verdicts, strict=True):
            self._advance(active, proposal, output, verdict)
        self.metrics.record_step(k)
        # A step that captured a CUDA graph (the first of its shape) costs what the capture
        # does, tens of steps: it would teach the cost model that its K is slow.
        if decoding_only and CAPTURED.captures == captures:
            # The verdicts were read back above, so on a GPU this wall time covers the step's
            # kernels too.
            drafted_k = max((len(row.drafted) for row in verdicts), default=0)
            self.speculation.observe_step(batch_size, drafted_k, time.perf_counter() - started)

    def _draft(self, k: int) -> list[Proposal | None]:
        """Up to ``k`` drafts for every sequence that can take them, in one batch."""
        proposals: list[Proposal | None] = [None] * len(self._active)
        if self.drafter is None or k < 1:
            return proposals
        drafting: list[int] = []
        requests: list[DraftRequest] = []
        for index, active in enumerate(self._active):
            request = self._draft_request(self.drafter, active, k)
            if request is not None:
                drafting.append(index)
                requests.append(request)
        for index, proposal in zip(drafting, self.drafter.propose(requests), strict=True):
            proposals[index] = proposal
        return proposals

    def _draft_request(self, drafter: BatchDrafter, active: _Active, k: int) -> DraftRequest | None:
        num_drafts = min(k, active.sequence.remaining - 1)
        slot = active.draft_slot
        if slot is None or not active.prefilled or num_drafts < 1 or active.unseen is None:
            return None
        # The head's entries lag the target by the positions it has not seen features of.
        next_ids = active.sequence.tokens_in(drafter.slots.length(slot) + 1, active.cache.length + 1)
        return DraftRequest(
            slot=slot,
            aux_hidden_states=active.unseen,
            next_token_ids=next_ids,
            num_tokens=num_drafts,
            params=active.handle.request.sampling,
            generator=active.generator,
        )

    @staticmethod
    def _segment(active: _Active, proposal: Proposal | None) -> Segment:
        if not active.prefilled:
            return Segment(active.cache, active.sequence.prompt_ids, keep=1)
        if proposal is None:
            return Segment(active.cache, [active.sequence.last_token], keep=1)
        # The drafts stay on the device (their count is a shape): they come back with the verdicts.
        drafts = proposal.token_ids
        keep = 1 + int(drafts.shape[0])
        return Segment(active.cache, [active.sequence.last_token], keep=keep, drafted=drafts)

    def _advance(
        self, active: _Active, proposal: Proposal | None, output: SegmentOutput, row: RowVerdict
    ) -> None:
        """Keep what this step decided (``step_verdicts``)."""
        verdict = row.verdict
        if proposal is None:
            if not active.prefilled:
                self.metrics.prompt_tokens.inc(len(active.sequence.prompt_ids))
                active.prefilled = True
            self._keep_features(active, output.features)
            self._emit(active, [verdict.next_token])
            return
        proposed = len(row.drafted)
        active.cache.crop(active.cache.length - (proposed - verdict.accepted))
        assert output.features is not None  # a head's forward always captures
        active.unseen = output.features[: verdict.accepted + 1]
        active.handle.stats.proposed_per_step.append(proposed)
        active.handle.stats.accepted_per_step.append(verdict.accepted)
        self.speculation.observe(proposed, verdict.accepted)
        self.metrics.record_verification(proposed, verdict.accepted)
        self._emit(active, row.accepted_tokens)

    @staticmethod
    def _keep_features(active: _Active, features: torch.Tensor | None) -> None:
        """Without drafts this step, the head still needs these positions' features later."""
        if features is None or active.draft_slot is None:
            return
        active.unseen = features if active.unseen is None else torch.cat([active.unseen, features])

    def _emit(self, active: _Active, token_ids: list[int]) -> None:
        sequence = active.sequence
        before = len(sequence.new_token_ids)
        sequence.emit(token_ids)
        new = sequence.new_token_ids[before:]
        self.metrics.generation_tokens.inc(len(new))
        active.handle.deliver(TokenEvent(new, sequence.finish_reason))

    def _retire(self) -> None:
        still: list[_Active] = []
        for active in self._active:
            if active.sequence.finished or active.handle.done:
                self._release(active)
            elif active.handle.cancelled.is_set():
                self._finish(active, TokenEvent([], "cancelled"))
            else:
                still.append(active)
        self._active = still
        self.metrics.running.set(len(still))

    def _finish(self, active: _Active, event: TokenEvent) -> None:
        if not active.handle.done:
            active.handle.deliver(event)
        self._release(active)

    def _release(self, active: _Active) -> None:
        active.session.close()
        if active.handle.finish_reason is not None:
            self.metrics.requests_finished.labels(finished_reason=active.handle.finish_reason).inc()
