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

On a GPU a plain step (K = 0) is read only once the next one is queued, each row fed the
token it chose on the device (``serving.step_rows``), so the host's bookkeeping runs beside
the device's work instead of between its steps.

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
from types import TracebackType

import torch
from transformers import PreTrainedModel

from engine.cuda_graphs import CAPTURED
from engine.device_health import device_fault
from engine.drafting.batch_draft import BatchDrafter
from engine.drafting.draft import Proposal
from engine.heads.draft_precision import draft_dtype
from engine.heads.model import Eagle3DraftModel
from engine.packed_linear import pack_linear_layers, packing_available
from engine.segments import SegmentOutput, ServingTarget
from engine.serving_targets import sequence_limit, serving_target
from engine.slot_target import SlotTarget
from serving.metrics import EngineMetrics
from serving.requests import EventSink, GenerationRequest, RequestHandle, TokenEvent
from serving.speculation import AdaptiveSpeculation, FixedSpeculation, SpeculationPolicy
from serving.step_rows import ActiveRequest, QueuedStep, draft_proposals, segment_of
from serving.step_verification import RowVerdict, queue_step_verdicts
from speculative.decoder import _check_head_fits, _eos_of
from speculative.sequence import SequenceState

logger = logging.getLogger(__name__)

# How often an idle engine thread wakes up to notice ``close``.
_IDLE_POLL_SECONDS = 0.1


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
        overlap: bool | None = None,
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
        # Plain steps overlap on a GPU's slot pool (serving.step_rows). A CPU has nothing to
        # overlap, and the targets that build their inputs on the host (packed, recurrent)
        # would read the queued step's tokens first: each would only run a dead step per EOS.
        if overlap is None:
            overlap = self.device.type == "cuda" and isinstance(self.target, SlotTarget)
        self.overlap = overlap
        self._pending: QueuedStep | None = None
        self._last_read = 0.0  # perf_counter when a step's verdicts were last read
        self._queue: queue.Queue[RequestHandle] = queue.Queue()
        self._active: list[ActiveRequest] = []
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
                self._pending = None  # its rows were all cancelled: nothing left to read it for
                continue
            try:
                with torch.inference_mode():
                    self._step()
            except Exception as exc:  # one bad step must not take the server down
                logger.exception(
                    "engine step failed; failing the %d requests in the batch", len(self._active)
                )
                self._pending = None
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
        # A row that ended while a step was queued holds its slot until that step is read.
        held = self._pending.rows_gone(self._active) if self._pending is not None else 0
        while len(self._active) + held < self.max_batch_size:
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

    def _activate(self, handle: RequestHandle) -> ActiveRequest:
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
        active = ActiveRequest(handle, sequence, self.target.new_cache(), generator, draft_slot=None)
        if self.drafter is not None:
            active.draft_slot = self.drafter.slots.acquire()
            active.session.callback(self.drafter.slots.release, active.draft_slot)
        return active

    def _step(self) -> None:
        started, captures = time.perf_counter(), CAPTURED.captures
        k = self.speculation.num_tokens(len(self._active)) if self.head is not None else 0
        pending, self._pending = self._pending, None
        if pending is not None and k > 0:
            # Drafting needs what each row accepted: read the queued step first.
            self._read(pending)
            pending = None
            self._retire()
            if not self._active:
                return
        queued = self._queue_step(k, pending, started, captures)
        if pending is not None:
            self._read(pending)  # the step before, while this one runs
        if queued is None:  # every row ended in the step before
            return
        if self.overlap and k == 0:
            self._pending = queued
        else:
            self._read(queued)

    def _queue_step(
        self, k: int, fed_by: QueuedStep | None, started: float, captures: int
    ) -> QueuedStep | None:
        """Drafts, the target's forward and the verdicts of one step, queued on the device.
        Rows in ``fed_by`` (a plain step not read yet; ``k`` is 0 then) take the token it
        chose, unread. None when no row is left to run."""
        if fed_by is None:
            rows = list(self._active)
            proposals = draft_proposals(self.drafter, rows, k)
            segments = [
                segment_of(active, proposal) for active, proposal in zip(rows, proposals, strict=True)
            ]
            # A step that prefills a joining prompt costs what the prompt costs, not what K does.
            decoding_only = all(active.prefilled for active in rows)
        else:
            rows, segments, decoding_only = fed_by.next_inputs(self._active)
            proposals = [None] * len(rows)
        if not rows:
            return None
        outputs = self.target.forward(segments)
        verdicts = queue_step_verdicts(
            proposals,
            outputs,
            [active.handle.request.sampling for active in rows],
            [active.generator for active in rows],
            no_drafts=self._no_drafts,
            vocab_size=self.vocab_size,
        )
        return QueuedStep(rows, proposals, outputs, verdicts, k, decoding_only, started, captures)

    def _read(self, step: QueuedStep) -> None:
        """Read a queued step's verdicts and keep what it decided for every row still there."""
        verdicts = step.verdicts.read()
        for active, proposal, output, row in zip(
            step.rows, step.proposals, step.outputs, verdicts, strict=True
        ):
            if not active.gone:  # a row that ended in the step before ran this one dead
                self._advance(active, proposal, output, row)
        self.metrics.record_step(step.k)
        now = time.perf_counter()
        # A step that captured a CUDA graph (the first of its shape) costs what the capture
        # does, tens of steps: it would teach the cost model that its K is slow. An overlapped
        # step costs the time between two reads: its queueing ran beside the one before.
        if step.timed and CAPTURED.captures == step.captures:
            drafted_k = max((len(row.drafted) for row in verdicts), default=0)
            seconds = now - max(step.started, self._last_read)
            self.speculation.observe_step(len(step.rows), drafted_k, seconds)
        self._last_read = now

    def _advance(
        self, active: ActiveRequest, proposal: Proposal | None, output: SegmentOutput, row: RowVerdict
    ) -> None:
        """Keep what this step decided (``queue_step_verdicts``)."""
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
    def _keep_features(active: ActiveRequest, features: torch.Tensor | None) -> None:
        """Without drafts this step, the head still needs these positions' features later."""
        if features is None or active.draft_slot is None:
            return
        active.unseen = features if active.unseen is None else torch.cat([active.unseen, features])

    def _emit(self, active: ActiveRequest, token_ids: list[int]) -> None:
        sequence = active.sequence
        before = len(sequence.new_token_ids)
        sequence.emit(token_ids)
        new = sequence.new_token_ids[before:]
        self.metrics.generation_tokens.inc(len(new))
        active.handle.deliver(TokenEvent(new, sequence.finish_reason))

    def _retire(self) -> None:
        still: list[ActiveRequest] = []
        for active in self._active:
            if active.sequence.finished or active.handle.done:
                self._release(active)
            elif active.handle.cancelled.is_set():
                self._finish(active, TokenEvent([], "cancelled"))
            else:
                still.append(active)
        self._active = still
        self.metrics.running.set(len(still))

    def _finish(self, active: ActiveRequest, event: TokenEvent) -> None:
        if not active.handle.done:
            active.handle.deliver(event)
        self._release(active)

    def _release(self, active: ActiveRequest) -> None:
        active.session.close()
        if active.handle.finish_reason is not None:
            self.metrics.requests_finished.labels(finished_reason=active.handle.finish_reason).inc()
