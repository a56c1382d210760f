"""Self-distillation: replace each assistant turn with the target model's own answer.

EAGLE trains the draft head to predict what the *target* would say, so answers
written by people or by other models teach it the wrong distribution. Each assistant
turn is regenerated from the already-regenerated prefix of its conversation, so a
later turn sees the target's earlier answers, as it would when serving.

Work is scheduled turn by turn across conversations: every step takes up to
``batch_size`` conversations whose next turn is ready and generates all of them in one
left-padded ``model.generate`` call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from trainer.data.schema import Conversation, Message
from trainer.data.tokenize import ChatTemplateError, render_chat


@dataclass(slots=True)
class RegenerationResult:
    conversations: list[Conversation]  # fully regenerated ones, in input order
    mode: str  # "greedy" or "sampled(temperature=..., top_p=...)"
    generated_tokens: int
    seconds: float
    responses: int = 0
    responses_cut_at_max_new_tokens: int = 0
    stopped: bool = False  # should_stop() ended the run before every conversation was done
    template_errors: int = 0  # conversations dropped because the chat template rejected them
    first_template_error: str | None = None


@dataclass(slots=True)
class _Job:
    """One conversation being regenerated: the turns so far and the positions still to answer."""

    index: int
    source: str
    messages: list[Message]
    pending: list[int] = field(default_factory=list)  # indices of assistant turns to (re)generate
    failed: bool = False

    @property
    def done(self) -> bool:
        return not self.pending or self.failed


@dataclass(frozen=True, slots=True)
class _Generation:
    temperature: float
    top_p: float
    max_new_tokens: int
    max_prompt_tokens: int | None
    stop_ids: list[int]
    pad_id: int


def sampling_mode(temperature: float, top_p: float) -> str:
    return "greedy" if temperature == 0 else f"sampled(temperature={temperature}, top_p={top_p})"


def regenerate_conversations(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: Sequence[Conversation],
    *,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_new_tokens: int = 256,
    batch_size: int = 8,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> RegenerationResult:
    """Regenerate every assistant turn with ``model``; greedy when temperature is 0.

    ``progress(done, total)`` counts responses generated. When ``should_stop()`` turns
    true the run ends after the current batch and returns the conversations completed.
    """
    _check_arguments(temperature, top_p, max_new_tokens, batch_size)
    started = time.monotonic()
    jobs = [_job_for(index, conversation) for index, conversation in enumerate(conversations)]
    result = RegenerationResult(
        conversations=[], mode=sampling_mode(temperature, top_p), generated_tokens=0, seconds=0.0
    )
    stop_ids = _stop_token_ids(model, tokenizer)
    generation = _Generation(
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        max_prompt_tokens=_max_prompt_tokens(model, max_new_tokens),
        stop_ids=stop_ids,
        pad_id=_pad_token_id(tokenizer, stop_ids),
    )
    was_training = model.training
    model.train(False)
    # A private RNG stream: the seed decides the samples without disturbing the caller's RNG.
    devices = [model.device] if model.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            _run_jobs(model, tokenizer, jobs, generation, batch_size, result, progress, should_stop)
    finally:
        model.train(was_training)
    result.conversations = [
        Conversation(messages=job.messages, source=job.source) for job in jobs if job.done and not job.failed
    ]
    result.seconds = time.monotonic() - started
    return result


def _run_jobs(  # noqa: PLR0917 - private; the public entry point is keyword-only
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    jobs: list[_Job],
    generation: _Generation,
    batch_size: int,
    result: RegenerationResult,
    progress: Callable[[int, int], None] | None,
    should_stop: Callable[[], bool] | None,
) -> None:
    total = sum(len(job.pending) for job in jobs)
    while True:
        ready, prompts = _next_batch(jobs, tokenizer, batch_size, result)
        if not ready:
            return
        if should_stop is not None and should_stop():
            result.stopped = True
            return
        answers = _generate(model, tokenizer, prompts, generation)
        for job, (text, token_count, cut) in zip(ready, answers, strict=True):
            turn = job.pending.pop(0)
            job.messages[turn] = Message(role="assistant", content=text)
            result.generated_tokens += token_count
            result.responses_cut_at_max_new_tokens += int(cut)
        result.responses += len(ready)
        if progress is not None:
            progress(result.responses, total)


def _check_arguments(temperature: float, top_p: float, max_new_tokens: int, batch_size: int) -> None:
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")


def _job_for(index: int, conversation: Conversation) -> _Job:
    messages = list(conversation.messages)
    pending = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not pending:
        # No answer recorded: answer the last user turn (anything after it has no reply to condition on).
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        if last_user is None:
            raise ValueError(f"{conversation.source or f'conversation {index}'}: no user or assistant turn")
        messages = [*messages[: last_user + 1], Message(role="assistant", content="")]
        pending = [last_user + 1]
    return _Job(index=index, source=conversation.source, messages=messages, pending=pending)


def _next_batch(
    jobs: list[_Job], tokenizer: PreTrainedTokenizerBase, batch_size: int, result: RegenerationResult
) -> tuple[list[_Job], list[str]]:
    """Up to batch_size ready jobs and their prompts; a conversation the template rejects is dropped."""
    ready: list[_Job] = []
    prompts: list[str] = []
    for job in jobs:
        if len(ready) == batch_size:
            break
        if job.done:
            continue
        try:
            prompts.append(_prompt_text(tokenizer, job))
        except ChatTemplateError as exc:
            job.failed = True
            result.template_errors += 1
            result.first_template_error = result.first_template_error or str(exc)
            continue
        ready.append(job)
    return ready, prompts


def _prompt_text(tokenizer: PreTrainedTokenizerBase, job: _Job) -> str:
    prefix = job.messages[: job.pending[0]]
    return render_chat(
        tokenizer,
        [{"role": m.role, "content": m.content} for m in prefix],
        add_generation_prompt=True,
        source=job.source,
    )


def _stop_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """End-of-turn ids: the generation config's (ChatML models name <|im_end|>), else the tokenizer's."""
    configured: Any = getattr(model.generation_config, "eos_token_id", None)
    ids: list[int] = []
    if isinstance(configured, int):
        ids = [configured]
    elif isinstance(configured, list | tuple):
        ids = [int(i) for i in configured]
    if not ids and tokenizer.eos_token_id is not None:
        ids = [int(tokenizer.eos_token_id)]
    if not ids:
        raise ValueError(
            "neither the model's generation config nor the tokenizer names an end-of-sequence token"
        )
    return ids


def _pad_token_id(tokenizer: PreTrainedTokenizerBase, stop_ids: list[int]) -> int:
    pad = tokenizer.pad_token_id
    return int(pad) if pad is not None else stop_ids[0]


def _max_prompt_tokens(model: PreTrainedModel, max_new_tokens: int) -> int | None:
    context = getattr(model.config, "max_position_embeddings", None)
    if not isinstance(context, int):
        return None
    if context <= max_new_tokens:
        raise ValueError(
            f"max_new_tokens {max_new_tokens} leaves no room in the model's {context}-token context"
        )
    return context - max_new_tokens


@torch.inference_mode()
def _generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    generation: _Generation,
) -> list[tuple[str, int, bool]]:
    """(answer text, tokens generated including the stop token, cut at max_new_tokens) per prompt."""
    encoded = [tokenizer(p, add_special_tokens=False, verbose=False)["input_ids"] for p in prompts]
    if generation.max_prompt_tokens is not None:
        # Keep the end of an over-long prompt: the latest turns matter most for the answer.
        encoded = [ids[-generation.max_prompt_tokens :] for ids in encoded]
    width = max(len(ids) for ids in encoded)
    # Left padding keeps every prompt's last token in the final column, where generation continues.
    input_ids = torch.tensor(
        [[generation.pad_id] * (width - len(ids)) + list(ids) for ids in encoded], dtype=torch.long
    )
    attention_mask = torch.tensor(
        [[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded], dtype=torch.long
    )
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": generation.temperature, "top_p": generation.top_p}
        if generation.temperature > 0
        else {"do_sample": False}
    )
    # PreTrainedModel does not declare generate(); every causal LM class mixes it in.
    generate: Any = model.generate
    output: Any = generate(
        input_ids=input_ids.to(model.device),
        attention_mask=attention_mask.to(model.device),
        max_new_tokens=generation.max_new_tokens,
        eos_token_id=generation.stop_ids,
        pad_token_id=generation.pad_id,
        **sampling,
    )
    answers: list[tuple[str, int, bool]] = []
    for row in output[:, width:].tolist():
        stop_at = next((i for i, token in enumerate(row) if token in generation.stop_ids), None)
        kept = row if stop_at is None else row[:stop_at]
        # Not stripped: leading whitespace the target emits is part of what the head must predict.
        text = str(tokenizer.decode(kept, skip_special_tokens=True))
        answers.append((text, len(kept) + (0 if stop_at is None else 1), stop_at is None))
    return answers
