"""Self-distillation of final answers: the target writes the last reply of each conversation.

A benchmark (and a deployment) hands the target a conversation and lets it reply; the
draft head must predict that reply. So the samples that match it best keep the given
turns as context and replace only the final answer with the target's own. That is one
generation per conversation however long it is, where regenerating every turn
(``trainer.data.regenerate``) costs one per assistant turn and changes the context.

A context too long for ``max_prompt_tokens`` loses its earliest exchanges (never the
system prompt or the last user turn), as a serving stack truncating history would.

Each result is also a training sample built from the generated token ids themselves
(decoding and re-tokenising can split text differently), with the loss on the reply
alone: the earlier turns are someone else's words, which the head never has to draft.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StoppingCriteria,
    StoppingCriteriaList,
)

from engine.feature_recorder import GenerationRecorder
from engine.generation import batching_supported, generate_batched
from engine.packed_generation import Recording, generate_packed, packing_supported
from engine.replies import Reply, SampleFeatures
from engine.runner_cache import RunnerCache
from engine.sampling import SamplingParams
from trainer.data.schema import Conversation, Message
from trainer.data.tokenize import ChatTemplateError, render_chat
from trainer.eagle.context_loss import distilled_loss_mask, fixed_opening, label_contexts
from trainer.eagle.generation_features import FeaturedSample


@dataclass
class Context:
    """The turns the target answers, rendered and tokenised once."""

    source: str
    messages: list[Message]
    prompt_ids: list[int]


@dataclass
class ContinuationResult:
    conversations: list[Conversation]  # context + the target's reply, in input order
    samples: list[FeaturedSample]  # prompt ids + reply ids (+ stop token), loss on the reply
    generated_tokens: int
    stopped: bool  # should_stop() ended the run early
    cut_at_max_new_tokens: int
    reply_from: list[int] = field(default_factory=list)  # per sample: where its reply starts


def _prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: list[Message]) -> list[int] | None:
    try:
        text = render_chat(
            tokenizer, [{"role": m.role, "content": m.content} for m in messages], add_generation_prompt=True
        )
    except ChatTemplateError:
        return None
    return list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def context_of(
    conversation: Conversation, tokenizer: PreTrainedTokenizerBase, *, max_prompt_tokens: int
) -> Context | None:
    """The turns before the last assistant reply (all turns if there is none), shortened from
    the front to fit; None when no user turn ends it or even the last exchange does not fit."""
    messages = list(conversation.messages)
    last_reply = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=len(messages))
    messages = messages[:last_reply]
    if not messages or messages[-1].role != "user":
        return None
    system = [m for m in messages[:1] if m.role == "system"]
    turns = messages[len(system) :]
    while turns:
        ids = _prompt_ids(tokenizer, system + turns)
        if ids is None:
            return None
        if len(ids) <= max_prompt_tokens:
            return Context(source=conversation.source, messages=system + turns, prompt_ids=ids)
        # Drop the oldest turn, and then up to the next user turn so the context starts with one.
        turns = turns[1:]
        while turns and turns[0].role != "user":
            turns = turns[1:]
    return None


def stop_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    configured: Any = getattr(model.generation_config, "eos_token_id", None)
    ids = [configured] if isinstance(configured, int) else list(configured or [])
    if not ids and tokenizer.eos_token_id is not None:
        ids = [int(tokenizer.eos_token_id)]
    if not ids:
        raise ValueError("neither the model's generation config nor the tokenizer names an end-of-turn token")
    return [int(i) for i in ids]


@torch.inference_mode()
def generate_replies(
    model: PreTrainedModel,
    prompts: list[list[int]],
    *,
    stop_ids: list[int],
    pad_id: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    recorder: GenerationRecorder | None = None,
    finish_fraction: float | None = None,
) -> list[tuple[list[int], int | None, SampleFeatures | None]]:
    """(reply tokens without the stop token, the stop token or None when cut at
    max_new_tokens, the recorded features of prompt + reply when ``recorder``) per prompt.

    With ``finish_fraction``, generation ends once that share of the rows has ended its
    reply; the others come back cut (stop token None), as at max_new_tokens."""
    width = max(len(ids) for ids in prompts)
    # Left padding keeps every prompt's last token in the final column, where generation continues.
    input_ids = torch.tensor(
        [[pad_id] * (width - len(ids)) + ids for ids in prompts], dtype=torch.long, device=model.device
    )
    attention_mask = torch.tensor(
        [[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], dtype=torch.long, device=model.device
    )
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_p": top_p}
        if temperature > 0
        else {"do_sample": False}
    )
    generate: Any = model.generate  # mixed into every causal LM class, not declared on PreTrainedModel
    argmax = _ArgmaxRecorder()
    with recorder or nullcontext():
        output = generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            eos_token_id=stop_ids,
            pad_token_id=pad_id,
            # Preallocated keys/values: the default cache concatenates every layer's cache at
            # every step, which made batch-48 generation ~1.75x slower on 2 CPU cores.
            cache_implementation="static",
            # On a GPU, generate would compile the forward with a static cache (mode
            # "reduce-overhead": CUDA graphs): each new batch shape recompiles, and the recorder's
            # hooks would keep graph outputs that the next step overwrites.
            disable_compile=True,
            logits_processor=LogitsProcessorList([argmax]) if recorder else None,
            stopping_criteria=None
            if finish_fraction is None
            else StoppingCriteriaList([_EnoughRowsFinished(stop_ids, len(prompts), finish_fraction)]),
            **sampling,
        )
    replies: list[tuple[list[int], int | None, SampleFeatures | None]] = []
    for index, row in enumerate(output[:, width:].tolist()):
        stop_at = next((i for i, token in enumerate(row) if token in stop_ids), None)
        tokens, stop_token = (row, None) if stop_at is None else (row[:stop_at], row[stop_at])
        features = None
        if recorder is not None:
            prompt = len(prompts[index])
            length = prompt + len(tokens) + (stop_token is not None)
            # The target's greedy choice after each position from the prompt's last on: what
            # the loss compares the draft with (the reply token itself when greedy).
            argmax_ids = torch.zeros(length, dtype=torch.long)
            argmax_ids[prompt - 1 : length - 1] = argmax.steps(index)[: length - prompt]
            features = recorder.row(index, width - prompt, length, argmax_ids)
        replies.append((tokens, stop_token, features))
    return replies


class _EnoughRowsFinished(StoppingCriteria):
    """Ends a batch once ``fraction`` of its rows produced an end-of-turn token: otherwise every
    row is computed until the longest one ends, and a batch of short replies pays for its
    single runaway row at every step."""

    def __init__(self, stop_ids: list[int], rows: int, fraction: float) -> None:
        if not 0 < fraction <= 1:
            raise ValueError(f"finish_fraction must be in (0, 1], got {fraction}")
        self._stop_ids = torch.tensor(stop_ids)
        self._finished = torch.zeros(rows, dtype=torch.bool)
        self._needed = max(1, math.ceil(fraction * rows))

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
    ) -> torch.BoolTensor:
        self._finished |= torch.isin(input_ids[:, -1].cpu(), self._stop_ids)
        enough = int(self._finished.sum()) >= self._needed
        return torch.full_like(self._finished, enough).to(input_ids.device)  # type: ignore[return-value]


class _ArgmaxRecorder(LogitsProcessor):
    """Keeps the argmax of every generation step's logits (argmax is unchanged by the
    temperature and top-p warpers, so it is the target's greedy token in any mode)."""

    def __init__(self) -> None:
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._steps.append(scores.argmax(-1))
        return scores

    def steps(self, row: int) -> torch.Tensor:
        return torch.stack(self._steps, dim=1)[row].cpu()


def continue_conversations(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    contexts: Sequence[Context],
    *,
    max_new_tokens: int,
    batch_size: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    should_stop: Callable[[], bool] = lambda: False,
    progress: Callable[[int], None] = lambda done: None,
    feature_layers: Sequence[int] | None = None,
    feature_dtypes: tuple[torch.dtype, torch.dtype] = (torch.bfloat16, torch.float16),
    continuous: bool = True,
    context_loss: bool = False,
    exact: bool = False,
    runners: RunnerCache | None = None,
) -> ContinuationResult:
    """Append the target's reply to each context, up to ``batch_size`` rows at a time.

    Attention targets run with continuous batching on the engine's slot pool
    (``engine.generation.generate_batched``: a row that ends makes room for the next context
    at once, one attention call per layer for the whole batch); with ``exact`` they run on the
    packed path instead, whose replies are bit-for-bit batch-1 greedy decoding's (slower:
    attention sequence by sequence). Recurrent targets, or ``continuous=False``, run in fixed
    batches through ``generate``.
    ``should_stop`` is checked before every step (every batch for fixed batches); replies in
    flight then come back cut, and the replies done so far are returned in input order.
    With ``feature_layers`` (aux layer ids) each sample carries the target features
    recorded during generation (aux states and final hidden in ``feature_dtypes``).
    With ``context_loss`` the loss also covers the context past the chat template's fixed
    opening, labelled with the target's greedy token at each position.
    ``runners`` keeps the slot pool (and CUDA graphs) of continuous batching over calls: a caller
    that continues chunk after chunk of the same shape passes one cache to every call.
    """
    stop_ids = stop_token_ids(model, tokenizer)
    was_training = model.training
    model.train(False)
    recording = None if feature_layers is None else Recording(layers=feature_layers, dtypes=feature_dtypes)
    sampling = SamplingParams(temperature=temperature, top_p=top_p)
    opening = fixed_opening(tokenizer)
    try:
        if continuous and (batching_supported(model) if not exact else packing_supported(model)):
            finished = 0

            def count(_index: int, _reply: Reply) -> None:
                nonlocal finished
                finished += 1
                progress(finished)

            common: dict[str, Any] = {
                "stop_ids": stop_ids,
                "max_new_tokens": max_new_tokens,
                "batch_size": batch_size,
                "sampling": sampling,
                "should_stop": should_stop,
                "on_reply": count,
                # Its last token may merge differently with the user's text; the rest is shared.
                "shared_prefix": opening[:-1],
            }
            prompts = [c.prompt_ids for c in contexts]
            if exact:
                replies, stopped = generate_packed(model, prompts, recording=recording, **common)
            else:
                recorder = None if recording is None else recording.recorder(model)
                replies, stopped = generate_batched(
                    model, prompts, recorder=recorder, runners=runners, **common
                )
        else:
            replies, stopped = _continue_in_batches(
                model,
                tokenizer,
                contexts,
                stop_ids,
                max_new_tokens,
                batch_size,
                sampling,
                recording,
                should_stop,
                progress,
            )
    finally:
        model.train(was_training)
    result = ContinuationResult(
        conversations=[], samples=[], generated_tokens=0, stopped=stopped, cut_at_max_new_tokens=0
    )
    if context_loss:
        label_contexts(
            model,
            [
                (max(len(context.prompt_ids) - 1, 0), reply.features)
                for context, reply in zip(contexts, replies, strict=True)
                if reply is not None and reply.features is not None
            ],
        )
    for context, reply in zip(contexts, replies, strict=True):
        if reply is not None:
            _append_reply(result, tokenizer, context, reply, opening if context_loss else None)
    return result


def _continue_in_batches(  # noqa: PLR0917 - private; continue_conversations is the entry point
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    contexts: Sequence[Context],
    stop_ids: list[int],
    max_new_tokens: int,
    batch_size: int,
    sampling: SamplingParams,
    recording: Recording | None,
    should_stop: Callable[[], bool],
    progress: Callable[[int], None],
) -> tuple[list[Reply | None], bool]:
    """Fixed left-padded batches through ``generate`` (models packed attention cannot run)."""
    pad_id = int(tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else stop_ids[0]
    replies: list[Reply | None] = [None] * len(contexts)
    for start in range(0, len(contexts), batch_size):
        if should_stop():
            return replies, True
        batch = contexts[start : start + batch_size]
        recorder = None if recording is None else recording.recorder(model)
        generated = generate_replies(
            model,
            [c.prompt_ids for c in batch],
            stop_ids=stop_ids,
            pad_id=pad_id,
            max_new_tokens=max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            recorder=recorder,
        )
        for offset, (tokens, stop_token, features) in enumerate(generated):
            replies[start + offset] = Reply(tokens=tokens, stop_token=stop_token, features=features)
        progress(start + len(batch))
    return replies, False


def _append_reply(
    result: ContinuationResult,
    tokenizer: PreTrainedTokenizerBase,
    context: Context,
    reply: Reply,
    opening: list[int] | None,
) -> None:
    # Not stripped: leading whitespace the target emits is part of what the head predicts.
    text = str(tokenizer.decode(reply.tokens, skip_special_tokens=True))
    message = Message(role="assistant", content=text)
    result.conversations.append(Conversation(messages=[*context.messages, message], source=context.source))
    # The stop token is learned too: drafting it ends a reply one verification earlier.
    reply_ids = reply.tokens if reply.stop_token is None else [*reply.tokens, reply.stop_token]
    result.samples.append(
        FeaturedSample(
            input_ids=[*context.prompt_ids, *reply_ids],
            loss_mask=distilled_loss_mask(context.prompt_ids, len(reply_ids), opening),
            source=context.source,
            features=reply.features,
        )
    )
    result.reply_from.append(len(context.prompt_ids))
    result.generated_tokens += len(reply_ids)
    result.cut_at_max_new_tokens += int(reply.stop_token is None)
