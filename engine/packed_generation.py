"""Continuous-batching generation for distillation: a row that ends hands its place to the next prompt.

``model.generate`` runs a batch until its longest row ends, so every row that finished early
keeps costing a full row of compute at every later step, and left padding costs the same in
the prefill. Distillation replies vary from a few tokens to the length cap, so on a CPU budget
that waste was a third or more of the target's time.

Here each step runs the target once over the packed new tokens of up to ``batch_size`` rows
(``engine.packed_attention``: each row attends to its own keys and values): a
joining row's whole prompt, every other row's last token. A row leaves as soon as it emits a
stop token or reaches ``max_new_tokens``, and the next prompt joins at the following step. No
padding is ever computed.

The target's features are recorded on the way (the aux-layer inputs and the final norm's
output of every position fed), so the head trains on them without a second target pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel

from engine.feature_recorder import GenerationRecorder
from engine.generation import check_arguments, unfinished
from engine.packed_attention import SequenceKV
from engine.packed_target import PackedTarget, uses_full_attention
from engine.replies import Reply, SampleFeatures
from engine.sampling import SamplingParams, next_tokens
from engine.segments import Segment


@dataclass(frozen=True, slots=True)
class Recording:
    """Which target features to record, and in which dtypes (aux states, final hidden)."""

    layers: Sequence[int]
    dtypes: tuple[torch.dtype, torch.dtype]

    def recorder(self, model: PreTrainedModel) -> GenerationRecorder:
        """A recorder of these features for ``model`` (open it with ``with``)."""
        return GenerationRecorder(model, self.layers, aux_dtype=self.dtypes[0], final_dtype=self.dtypes[1])


@dataclass(slots=True)
class _Row:
    index: int
    prompt: list[int]
    cache: SequenceKV
    feed: list[int]  # the tokens the next forward runs: the prompt, then the last generated token
    tokens: list[int] = field(default_factory=list)
    argmax: list[int] = field(default_factory=list)  # the target's greedy choice at each generation step
    aux: list[torch.Tensor] = field(default_factory=list)
    final: list[torch.Tensor] = field(default_factory=list)


def packing_supported(model: PreTrainedModel) -> bool:
    """Whether distillation runs ``model`` with ``generate_packed``: full-attention targets only.
    Packed attention serves sliding-window layers and sinks too (the serving engine relies on
    it), but distillation keeps ``generate`` batches for such targets for now."""
    return uses_full_attention(model)


@torch.inference_mode()
def generate_packed(
    model: PreTrainedModel,
    prompts: Sequence[list[int]],
    *,
    stop_ids: Sequence[int],
    max_new_tokens: int,
    batch_size: int,
    sampling: SamplingParams,
    recording: Recording | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_reply: Callable[[int, Reply], None] = lambda index, reply: None,
    shared_prefix: Sequence[int] = (),
) -> tuple[list[Reply | None], bool]:
    """``engine.generation.generate_batched``'s contract (replies in input order, whether
    ``should_stop`` ended the run, rows cut on a stop, ``on_reply`` as rows end, the shared
    prefix run once), on the exact packed path: each reply is batch-1 greedy decoding's, bit
    for bit, at the cost of attention sequence by sequence."""
    check_arguments(prompts, batch_size, max_new_tokens)
    stops = frozenset(int(i) for i in stop_ids)
    replies: list[Reply | None] = [None] * len(prompts)
    previous_attention = model.config._attn_implementation
    target = PackedTarget(model, None)
    recorder = None if recording is None else recording.recorder(model)
    waiting = iter(range(len(prompts)))
    active: list[_Row] = []
    stopped = False
    try:
        if recorder is not None:
            recorder.__enter__()
        prefix = _run_prefix(target, list(shared_prefix), recorder)
        while True:
            if should_stop():
                stopped = unfinished(replies)
                break
            active.extend(_admit(waiting, prompts, target, batch_size - len(active), max_new_tokens, prefix))
            if not active:
                break
            tokens = _step(target, active, sampling, recorder)
            still: list[_Row] = []
            for row, token in zip(active, tokens, strict=True):
                row.tokens.append(token)
                if token in stops or len(row.tokens) == max_new_tokens:
                    _finish(row, replies, on_reply, ended=token in stops)
                else:
                    row.feed = [token]
                    still.append(row)
            active = still
        for row in active:
            if row.tokens:
                _finish(row, replies, on_reply, ended=False)
    finally:
        if recorder is not None:
            recorder.__exit__(None, None, None)
        target.close()
        # Packed attention falls back to SDPA outside a packed step, but later code (generate,
        # the training pass) should see the model exactly as it was handed in.
        model.set_attn_implementation(previous_attention)
    return replies, stopped


@dataclass(frozen=True, slots=True)
class _Prefix:
    """The shared prefix, run once: its ids, keys/values and recorded features."""

    ids: list[int]
    cache: SequenceKV
    aux: torch.Tensor | None
    final: torch.Tensor | None

    def starts(self, prompt: list[int]) -> bool:
        # At least one token of the prompt must be left to run: its logits choose the first token.
        return bool(self.ids) and len(prompt) > len(self.ids) and prompt[: len(self.ids)] == self.ids


def _run_prefix(target: PackedTarget, ids: list[int], recorder: GenerationRecorder | None) -> _Prefix:
    cache = target.new_cache(len(ids))
    if not ids:
        return _Prefix(ids=ids, cache=cache, aux=None, final=None)
    target.forward([Segment(cache=cache, token_ids=ids, keep=1)])
    if recorder is None:
        return _Prefix(ids=ids, cache=cache, aux=None, final=None)
    aux, final = recorder.take_latest()
    return _Prefix(ids=ids, cache=cache, aux=aux[0], final=final[0])


def _admit(  # noqa: PLR0917 - private helper of generate_packed
    waiting: Iterator[int],
    prompts: Sequence[list[int]],
    target: PackedTarget,
    room: int,
    max_new_tokens: int,
    prefix: _Prefix,
) -> list[_Row]:
    """Up to ``room`` rows for the next waiting prompts, each with a cache sized for its prompt
    and the longest reply (filled in place: no copy of the cache at every step), starting
    from the shared prefix's keys and values when the prompt begins with it."""
    rows: list[_Row] = []
    for _ in range(max(room, 0)):
        index = next(waiting, None)
        if index is None:
            break
        prompt = list(prompts[index])
        if not prompt:
            raise ValueError(f"prompt {index} is empty")
        cache = target.new_cache(len(prompt) + max_new_tokens)
        row = _Row(index=index, prompt=prompt, cache=cache, feed=prompt)
        if prefix.starts(prompt):
            cache.extend_from(prefix.cache)
            row.feed = prompt[len(prefix.ids) :]
            if prefix.aux is not None and prefix.final is not None:
                row.aux.append(prefix.aux)
                row.final.append(prefix.final)
        rows.append(row)
    return rows


def _step(
    target: PackedTarget, active: list[_Row], sampling: SamplingParams, recorder: GenerationRecorder | None
) -> list[int]:
    """One target forward over every row's feed; the next token of each row."""
    outputs = target.forward([Segment(cache=row.cache, token_ids=row.feed, keep=1) for row in active])
    greedy, chosen = next_tokens(torch.cat([output.logits for output in outputs]).float(), sampling)
    if recorder is not None:
        aux, final = recorder.take_latest()
        lengths = [len(row.feed) for row in active]
        pieces = zip(active, torch.split(aux[0], lengths), torch.split(final[0], lengths), strict=True)
        for row, row_aux, row_final in pieces:
            row.aux.append(row_aux)
            row.final.append(row_final)
    for row, choice in zip(active, greedy.tolist(), strict=True):
        row.argmax.append(int(choice))
    return [int(token) for token in chosen.tolist()]


def _finish(
    row: _Row, replies: list[Reply | None], on_reply: Callable[[int, Reply], None], *, ended: bool
) -> None:
    tokens, stop_token = (row.tokens[:-1], row.tokens[-1]) if ended else (row.tokens, None)
    reply = Reply(tokens=tokens, stop_token=stop_token, features=_features(row) if row.aux else None)
    replies[row.index] = reply
    on_reply(row.index, reply)


def _features(row: _Row) -> SampleFeatures:
    """Features of prompt + every generated token; the last generated token was never fed back,
    so its features are zeros (no loss reads them: nothing follows it)."""
    prompt, length = len(row.prompt), len(row.prompt) + len(row.tokens)
    aux, final = torch.cat(row.aux), torch.cat(row.final)
    aux_out = aux.new_zeros((length, aux.shape[-1]))
    final_out = final.new_zeros((length, final.shape[-1]))
    aux_out[: aux.shape[0]] = aux
    final_out[: final.shape[0]] = final
    argmax_ids = torch.zeros(length, dtype=torch.long)
    # The target's greedy choice after each position from the prompt's last on: what the loss
    # compares the draft with (the reply token itself when greedy).
    argmax_ids[prompt - 1 : length - 1] = torch.tensor(row.argmax, dtype=torch.long)
    # Kept in host memory with the sample for the whole run, whatever device recorded them.
    return SampleFeatures(
        aux_hidden_states=aux_out.cpu(), final_hidden=final_out.cpu(), argmax_ids=argmax_ids
    )
