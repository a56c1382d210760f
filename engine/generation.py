"""Continuous batching over a slot pool, for distillation and prompt writing.

Every busy slot decodes one token per step in one forward ``[rows, 1]``; prompts joining free
slots are prefilled first, together, as one right-padded forward (on a GPU once an eighth of
the slots is free: ``JOIN_SHARE``). Rows leave when they emit a stop token or reach
``max_new_tokens``, and the lowest free slot is taken first, so busy slots stay packed at the
front and a step runs only as many rows as the highest busy slot needs.

All per-row state lives on the device — lengths, the token to feed, reply tokens, the
target's greedy choices and the recorded features — so a step's cost does not grow with
Python work per row. The one host sync per step reads which rows ended (and their reply
lengths); only those rows are copied back. On a GPU that read comes a step late, once the next
step is queued (``engine.step_readback``).

Replies are the target's (greedy or sampled) replies, not bit-equal to batch-1 decoding:
the batch changes the last bits of each row's logits, which can flip a near-tie argmax.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch
from transformers import PreTrainedModel

from engine.join_policy import rows_per_join
from engine.recorded_features import FeatureBuffers
from engine.replies import FeatureRecorder, Reply
from engine.runner import SlotRunner, StepOutput, batch_rows_for, key_length_for, pad_rows, padding_groups
from engine.runner_cache import RunnerCache
from engine.sampling import SamplingParams, next_tokens
from engine.step_readback import EndedRow, PendingReplies, QueuedSnapshot, SlotSnapshot
from engine.transfers import CopiesQueued, int_tables_to, to_host


class _Slots:
    """One ``generate_batched`` run's state: per-slot device tensors and host bookkeeping.

    Slot ``slots`` (one past the rows) holds the shared prefix, which decode steps never reach."""

    def __init__(
        self,
        runner: SlotRunner,
        stop_ids: Sequence[int],
        max_new_tokens: int,
        *,
        waiting: int,
        join_at: int | None = None,
    ) -> None:
        self.runner, self.max_new = runner, max_new_tokens
        total, device = runner.pool.slots, runner.pool.device
        self.rows = total - 1
        self.stop_set = frozenset(int(i) for i in stop_ids)
        self.stops = torch.tensor(sorted(self.stop_set), dtype=torch.long, device=device)
        self.lengths = torch.zeros(total, dtype=torch.long, device=device)
        self.feed = torch.zeros(total, dtype=torch.long, device=device)
        self.count = torch.zeros(total, dtype=torch.long, device=device)
        self.alive = torch.zeros(total, dtype=torch.bool, device=device)
        self.ended = torch.zeros(total, dtype=torch.bool, device=device)
        self.tokens = torch.zeros((total, max_new_tokens), dtype=torch.long, device=device)
        self.argmax = torch.zeros((total, max_new_tokens), dtype=torch.long, device=device)
        self.features = FeatureBuffers(total, runner.pool.capacity, device)
        self.prompt_of: list[tuple[int, int] | None] = [None] * total  # (prompt index, prompt length)
        self.host_busy = np.zeros(total, dtype=bool)
        self.host_lengths = np.zeros(total, dtype=np.int64)
        self.epochs = np.zeros(total, dtype=np.int64)  # bumped when a slot changes hands
        self.free = list(range(self.rows))
        self.prefix: list[int] = []
        self.join_at = rows_per_join(self.rows, device) if join_at is None else join_at
        self.left = waiting  # prompts not yet admitted


def _joining_now(state: _Slots) -> bool:
    """Whether this step admits waiting prompts: enough free slots for a batch of joiners, or
    for every prompt still waiting."""
    return state.left > 0 and len(state.free) >= min(state.join_at, state.left)


def _is_stop(chosen: torch.Tensor, stops: torch.Tensor) -> torch.Tensor:
    """Which of ``chosen`` [rows] are stop ids, compared against every stop id at once.
    Not ``torch.isin``: with ten or more rows against a few stop ids it switches to sorting
    after ``unique``, whose data-dependent size reads back from a GPU, a host sync in the step."""
    return (chosen.unsqueeze(-1) == stops).any(-1)


def _record(state: _Slots, output: StepOutput, rows: torch.Tensor, at: torch.Tensor) -> None:
    if output.aux is not None and output.final is not None:
        state.features.write(rows, at, output.aux, output.final)


def _run_prefix(state: _Slots, ids: list[int]) -> None:
    """Run the shared prefix once, into the prefix slot; joiners that start with it copy it."""
    device = state.runner.pool.device
    positions = torch.arange(len(ids), device=device).unsqueeze(0)
    slot = torch.tensor([state.rows], device=device)
    output = state.runner.forward(
        torch.tensor([ids], device=device), positions, positions, slots=slot, key_length=len(ids)
    )
    _record(state, output, slot.unsqueeze(1), positions)
    state.prefix = ids


def _admit(state: _Slots, sampling: SamplingParams, joiners: list[tuple[int, int, list[int]]]) -> None:
    """Prefill each joiner ``(slot, prompt index, prompt)`` and choose its first token.

    Joiners of similar length share a forward; a long prompt is not padded onto short ones
    (at the start every slot joins at once, and padding would double the prefill)."""
    device, n = state.runner.pool.device, len(state.prefix)
    starts = [n if n and len(p) > n and p[:n] == state.prefix else 0 for _, _, p in joiners]
    with_prefix = [slot for (slot, _, _), start in zip(joiners, starts, strict=True) if start]
    if with_prefix:
        (targets,) = int_tables_to(device, with_prefix)  # pinned: a pageable copy waits for the device
        sources = torch.full_like(targets, state.rows)
        state.runner.pool.move(sources, targets, n)
        state.features.move(sources, targets, n)
    feeds = [len(prompt) - start for (_, _, prompt), start in zip(joiners, starts, strict=True)]
    for group in padding_groups(feeds, max_tokens=PREFILL_TOKENS[device.type == "cuda"]):
        _prefill(state, sampling, [joiners[i] for i in group], [starts[i] for i in group])


# Most tokens (padding included) one prefill forward runs, on CPU and on CUDA: bounds the
# activations' memory; a CPU gains nothing from more rows at this size.
PREFILL_TOKENS = (2048, 32768)


def _prefill(
    state: _Slots, sampling: SamplingParams, joiners: list[tuple[int, int, list[int]]], starts: list[int]
) -> None:
    pool, device = state.runner.pool, state.runner.pool.device
    feeds = [prompt[start:] for (_, _, prompt), start in zip(joiners, starts, strict=True)]
    width = max(len(feed) for feed in feeds)
    host_positions = np.array(starts, dtype=np.int64)[:, None] + np.arange(width)[None, :]
    real = np.arange(width)[None, :] < np.array([len(f) for f in feeds])[:, None]
    lengths = [len(prompt) for _, _, prompt in joiners]
    slots, ids, positions, at, last, prompt_lengths = int_tables_to(
        device,
        [slot for slot, _, _ in joiners],
        pad_rows(feeds, 0),
        host_positions,
        np.where(real, host_positions, pool.scratch),
        [len(feed) - 1 for feed in feeds],
        lengths,
    )
    shape = (len(feeds), width)
    positions, at = positions.view(shape), at.view(shape)
    output = state.runner.forward(
        ids.view(shape),
        positions,
        at,
        slots=slots,
        key_length=key_length_for(max(lengths), state.runner.key_limit),
    )
    _record(state, output, slots.unsqueeze(1), at)
    last_hidden = output.hidden[torch.arange(len(feeds), device=device), last]
    greedy, chosen = next_tokens(state.runner.logits(last_hidden), sampling)
    state.lengths[slots] = prompt_lengths
    state.feed[slots] = chosen
    state.tokens[slots, 0], state.argmax[slots, 0] = chosen, greedy
    state.count[slots] = 1
    done = _is_stop(chosen, state.stops) | (state.max_new <= 1)
    state.alive[slots], state.ended[slots] = ~done, done
    for (slot, index, prompt), length in zip(joiners, lengths, strict=True):
        state.prompt_of[slot] = (index, len(prompt))
        state.host_busy[slot] = True
        state.host_lengths[slot] = length
        state.epochs[slot] += 1


def _compact(state: _Slots) -> None:
    """Move the highest busy rows into the lowest free slots (once no prompt is waiting), so
    the rows still running are the first ones and a decode step runs no finished row. A move
    copies one slot's keys, values and features, once; a step over dead rows costs every step."""
    busy = np.flatnonzero(state.host_busy[: state.rows])
    free = np.flatnonzero(~state.host_busy[: busy.size])
    moves = list(zip(busy[::-1][: free.size].tolist(), free.tolist(), strict=True))
    if not moves:
        return
    device = state.runner.pool.device
    sources, targets = int_tables_to(device, [high for high, _ in moves], [low for _, low in moves])
    length = int(state.host_lengths[[high for high, _ in moves]].max())
    state.runner.pool.move(sources, targets, length)
    state.features.move(sources, targets, length)
    for tensor in (
        state.lengths,
        state.feed,
        state.count,
        state.alive,
        state.ended,
        state.tokens,
        state.argmax,
    ):
        tensor[targets] = tensor[sources]
    for high, low in moves:
        state.prompt_of[low], state.prompt_of[high] = state.prompt_of[high], None
        state.host_lengths[low] = state.host_lengths[high]
        state.host_busy[low], state.host_busy[high] = True, False
        state.epochs[[low, high]] += 1
    state.alive[sources] = False
    state.ended[sources] = False
    state.free = sorted(set(state.free) - {low for _, low in moves} | {high for high, _ in moves})


def _decode(state: _Slots, sampling: SamplingParams) -> None:
    """One token for every live row among the first slots; ended rows write to scratch."""
    pool = state.runner.pool
    rows = batch_rows_for(int(np.flatnonzero(state.host_busy).max()), state.rows)
    alive, lengths = state.alive[:rows], state.lengths[:rows]
    at = torch.where(alive, lengths, pool.scratch).unsqueeze(1)
    output = state.runner.decode(
        state.feed[:rows].unsqueeze(1),
        lengths.unsqueeze(1),
        at,
        key_length=key_length_for(int(state.host_lengths[:rows].max()) + 1, state.runner.key_limit),
    )
    _record(state, output, torch.arange(rows, device=pool.device).unsqueeze(1), at)
    greedy, chosen = next_tokens(state.runner.logits(output.hidden[:, 0]), sampling)
    index = torch.arange(rows, device=pool.device)
    column = state.count[:rows].clamp(max=state.max_new - 1)
    state.tokens[index, column] = torch.where(alive, chosen, state.tokens[index, column])
    state.argmax[index, column] = torch.where(alive, greedy, state.argmax[index, column])
    step = alive.long()
    state.lengths[:rows] += step
    state.count[:rows] += step
    state.feed[:rows] = torch.where(alive, chosen, state.feed[:rows])
    newly = alive & (_is_stop(chosen, state.stops) | (state.count[:rows] >= state.max_new))
    state.ended[:rows] |= newly
    state.alive[:rows] = alive & ~newly
    state.host_lengths[:rows] += state.host_busy[:rows]


def _snapshot(state: _Slots) -> QueuedSnapshot:
    return QueuedSnapshot(state.count, state.ended, state.epochs)


def _take(state: _Slots, snapshot: SlotSnapshot, *, cut: bool) -> PendingReplies:
    """The rows ``snapshot`` shows ended (with ``cut``, every busy row that has a token), freed,
    with their tokens and features on their way to the host."""
    wanted = snapshot.ended if not cut else snapshot.ended | (snapshot.counts > 0)
    done = np.flatnonzero(state.host_busy & wanted & snapshot.speaks_for(state.epochs))
    if done.size == 0:
        return PendingReplies.none()
    device = state.runner.pool.device
    (slots,) = int_tables_to(device, done)
    ended_slots: list[int] = done.tolist()
    placements = [placed for slot in ended_slots if (placed := state.prompt_of[slot]) is not None]
    assert len(placements) == len(ended_slots)  # every busy slot holds its prompt's placement
    generated = [int(snapshot.counts[slot]) for slot in ended_slots]
    rows = [
        EndedRow(index=placed[0], generated=count, ended=bool(snapshot.ended[slot]))
        for slot, placed, count in zip(ended_slots, placements, generated, strict=True)
    ]
    tokens = to_host(torch.stack([state.tokens[slots], state.argmax[slots]]))
    features = state.features.copy_back(slots, [placed[1] for placed in placements], generated)
    pending = PendingReplies(rows, tokens, features, state.stop_set, CopiesQueued(device))
    for slot in ended_slots:
        state.prompt_of[slot] = None
        state.host_busy[slot] = False
        state.epochs[slot] += 1
        heapq.heappush(state.free, slot)
    state.ended[slots] = False
    state.alive[slots] = False
    return pending


def batching_supported(model: PreTrainedModel) -> bool:
    """Whether ``generate_batched`` can run ``model``: any attention target (full, sliding
    window, sinks); not one with linear-attention (recurrent) layers, whose state is no KV."""
    text = model.config.get_text_config()
    return not any(kind == "linear_attention" for kind in getattr(text, "layer_types", None) or [])


def _next_joiners(
    state: _Slots, waiting: Iterator[tuple[int, list[int]]]
) -> list[tuple[int, int, list[int]]]:
    """The next waiting prompts, one per free slot (lowest slots first)."""
    joiners: list[tuple[int, int, list[int]]] = []
    while state.free:
        item = next(waiting, None)
        if item is None:
            break
        joiners.append((heapq.heappop(state.free), item[0], list(item[1])))
    state.left -= len(joiners)
    return joiners


def _deliver(
    done: PendingReplies, replies: list[Reply | None], on_reply: Callable[[int, Reply], None]
) -> None:
    for index, reply in done.replies():
        replies[index] = reply
        on_reply(index, reply)


def unfinished(replies: Sequence[Reply | None]) -> bool:
    """Whether a stop cut the run short: a reply still in flight or never started. A stop that
    comes just as the last row ends leaves a complete run (a shard's plan counts it done)."""
    return any(reply is None for reply in replies)


def check_arguments(
    prompts: Sequence[list[int]], batch_size: int, max_new_tokens: int, join_at: int | None = None
) -> None:
    for name, value in (("batch_size", batch_size), ("max_new_tokens", max_new_tokens), ("join_at", join_at)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    for index, prompt in enumerate(prompts):
        if not prompt:
            raise ValueError(f"prompt {index} is empty")


@torch.inference_mode()
def generate_batched(
    model: PreTrainedModel,
    prompts: Sequence[list[int]],
    *,
    stop_ids: Sequence[int],
    max_new_tokens: int,
    batch_size: int,
    sampling: SamplingParams,
    recorder: FeatureRecorder | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_reply: Callable[[int, Reply], None] = lambda index, reply: None,
    shared_prefix: Sequence[int] = (),
    runners: RunnerCache | None = None,
    overlap: bool | None = None,
    join_at: int | None = None,
) -> tuple[list[Reply | None], bool]:
    """Each prompt's reply, in input order, and whether ``should_stop`` ended the run.

    ``should_stop`` is checked before every step; when it turns true, rows in flight come back
    cut (their tokens so far, stop token None) and prompts never started come back None.
    ``on_reply(index, reply)`` is called as each row ends (rows end out of order). With a
    ``recorder`` (opened and closed here) each reply carries the features of prompt + reply.
    ``shared_prefix`` is run once; a prompt that starts with it copies its keys and features.
    With ``runners`` the run takes its runner (pool and CUDA graphs) from that cache and leaves
    it there, detached, for the next call; without, it builds one and closes it.
    ``overlap`` reads each step's ended rows once the next step is queued, so that the host's
    work overlaps the device's (``engine.step_readback``); by default on a GPU only, where it
    is worth a step more for each row that ends. ``join_at``: the free slots a step waits for
    before admitting waiting prompts (by default ``rows_per_join``: an eighth of the rows on a
    GPU, one on a CPU).
    """
    check_arguments(prompts, batch_size, max_new_tokens, join_at)
    replies: list[Reply | None] = [None] * len(prompts)
    if not prompts:
        return replies, False
    rows = min(batch_size, len(prompts))
    capacity = max(len(p) for p in prompts) + max_new_tokens + 1  # + the scratch position
    if runners is not None and runners.model is not model:
        raise ValueError("runners is a cache of another model's runners")
    runner = (
        SlotRunner(model, slots=rows + 1, capacity=capacity, recorder=recorder, graph_rows=rows)
        if runners is None
        else runners.take(rows=rows, capacity=capacity, recorder=recorder)
    )
    waiting = iter([(i, list(p)) for i, p in enumerate(prompts)])
    overlapped = runner.pool.device.type == "cuda" if overlap is None else overlap
    stop_asked = False
    try:
        state = _Slots(runner, stop_ids, max_new_tokens, waiting=len(prompts), join_at=join_at)
        if recorder is not None:
            recorder.__enter__()
        if shared_prefix:
            _run_prefix(state, list(shared_prefix))
        ahead: QueuedSnapshot | None = None  # the last step's, read once the next is queued
        arriving = PendingReplies.none()
        while True:
            if should_stop():
                stop_asked = True
                break
            if _joining_now(state):
                _admit(state, sampling, _next_joiners(state, waiting))
            elif state.free and not state.left:
                _compact(state)
            if not state.host_busy.any():
                break
            _decode(state, sampling)
            ready, ahead = (ahead, _snapshot(state)) if overlapped else (_snapshot(state), None)
            _deliver(arriving, replies, on_reply)
            arriving = PendingReplies.none() if ready is None else _take(state, ready.wait(), cut=False)
            if not overlapped:
                _deliver(arriving, replies, on_reply)
                arriving = PendingReplies.none()
        _deliver(arriving, replies, on_reply)
        # One last snapshot, read at once: first the rows that ended in steps no snapshot has been
        # read for (none when read at once), then, cut, the rows still in flight (a take frees
        # only the rows it delivers; the rest keep their epochs, so the snapshot still speaks
        # for them).
        last = _snapshot(state).wait()
        _deliver(_take(state, last, cut=False), replies, on_reply)
        stopped = stop_asked and unfinished(replies)
        _deliver(_take(state, last, cut=True), replies, on_reply)
    finally:
        if recorder is not None:
            recorder.__exit__(None, None, None)
        runner.close() if runners is None else runners.give_back(runner)
    return replies, stopped
