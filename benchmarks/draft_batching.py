"""What drafting costs the serving engine per step: one sequence at a time vs the batch at once.

    .venv/bin/python benchmarks/draft_batching.py --head RUN/eagle_model [--k 3] [--batches 1 2 4 8]

For B held-out prompts (the run's ``heldout.jsonl``), the target prefills each prompt once
to get its features; each sequence's cache first holds ``--context`` of its positions (0:
none), then every repetition adds the features of its next three positions and drafts K
tokens, either with ``Drafter.propose`` in a loop (the head runs K times per sequence, each
over its own cache) or with ``BatchDrafter.propose`` (the head runs K times for the whole
batch, over one slot pool), with the same weights packed as the engine packs them. Prints
milliseconds per engine step for each batch size and whether the drafts agree (they may
differ at a near-tie: the two attend with kernels of different shapes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.capture import TargetFeatureCapture
from engine.dispatched_ops import DispatchedOps
from engine.drafting.batch_draft import BatchDrafter, DraftRequest
from engine.drafting.draft import Drafter, Proposal
from engine.heads.export import load_head
from engine.heads.model import Eagle3DraftModel
from engine.packed_linear import pack_linear_layers, packing_available
from engine.sampling import SamplingParams
from speculative.evaluation import chat_prompts
from trainer.data import load_conversations

REPO = Path(__file__).resolve().parents[1]
REPETITIONS = 20


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--head", type=Path, required=True, help="EAGLE-3 head directory")
    parser.add_argument("--prompts", type=Path, default=None, help="default: heldout.jsonl beside the head")
    parser.add_argument("--k", type=int, default=3, help="draft tokens per sequence per step")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument(
        "--context", type=int, default=0, help="entries each cache holds before the timed step (0: none)"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    target = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    target.eval()  # type: ignore[no-untyped-call]
    head = load_head(args.head, target)
    if packing_available(target.device):
        pack_linear_layers(head)
    vocab = int(target.config.vocab_size)
    conversations = load_conversations([args.prompts or args.head.parent / "heldout.jsonl"]).conversations
    prompts = [ids[-256:] for ids in chat_prompts(tokenizer, conversations)][: max(args.batches)]
    features = []
    with torch.inference_mode(), TargetFeatureCapture(target, head.config.aux_layer_ids) as capture:
        for ids in prompts:
            target(torch.tensor([ids]))
            features.append(capture.aux_hidden_states()[0])

    vocabulary = head.config.draft_vocab_size
    print(
        f"K={args.k}, {torch.get_num_threads()} threads, head draft vocabulary {vocabulary}, "
        f"{args.context} entries cached before each step\n"
    )
    print(
        "| sequences | per sequence (ms/step) | batched (ms/step) | speedup | "
        "ops/step per sequence | ops/step batched | same drafts |"
    )
    print("|---|---|---|---|---|---|---|")
    for batch in args.batches:
        if batch > len(prompts):
            print(f"| {batch} | only {len(prompts)} held-out prompts | | | | | |")
            continue
        alone_ms, alone_ops, alone = _one_by_one(
            head, vocab, features[:batch], prompts[:batch], k=args.k, context=args.context
        )
        batched_ms, batched_ops, batched = _together(
            head, vocab, features[:batch], prompts[:batch], k=args.k, context=args.context
        )
        same = all(a.token_ids.tolist() == b.token_ids.tolist() for a, b in zip(alone, batched, strict=True))
        print(
            f"| {batch} | {alone_ms:.1f} | {batched_ms:.1f} | {alone_ms / batched_ms:.2f}x "
            f"| {alone_ops} | {batched_ops} | {same} |"
        )


def _split(ids: list[int], context: int) -> tuple[int, int]:
    """(entries cached before the step, entries the step adds): the step adds the last three
    positions' features, as one verification of a sequence in its reply hands the head."""
    new = min(3, len(ids) - 1)
    return min(context, len(ids) - 1 - new), new


def _one_by_one(
    head: Eagle3DraftModel,
    vocab: int,
    features: list[torch.Tensor],
    prompts: list[list[int]],
    *,
    k: int,
    context: int,
) -> tuple[float, int, list[Proposal]]:
    """``Drafter.propose`` for each sequence in turn, each over its own cache."""
    drafters = [Drafter(head, vocab) for _ in prompts]
    with ExitStack() as stack, torch.inference_mode():
        for drafter, feature, ids in zip(drafters, features, prompts, strict=True):
            stack.enter_context(drafter.session())
            cached, _ = _split(ids, context)
            if cached:
                drafter.commit(feature[:cached], torch.tensor(ids[1 : cached + 1]))

        def step() -> list[Proposal]:
            made = []
            for drafter, feature, ids in zip(drafters, features, prompts, strict=True):
                cached, new = _split(ids, context)
                made.append(
                    drafter.propose(
                        feature[cached : cached + new],
                        torch.tensor(ids[cached + 1 : cached + new + 1]),
                        num_tokens=k,
                        params=SamplingParams(),
                        generator=None,
                    )
                )
                drafter.cache.crop(cached)  # back to the cached entries for the next repetition
            return made

        return _time(step)


def _together(
    head: Eagle3DraftModel,
    vocab: int,
    features: list[torch.Tensor],
    prompts: list[list[int]],
    *,
    k: int,
    context: int,
) -> tuple[float, int, list[Proposal]]:
    """``BatchDrafter.propose`` for all sequences at once, each in a slot of one pool."""
    drafter = BatchDrafter(head, vocab, len(prompts))
    slots = [drafter.slots.acquire() for _ in prompts]
    with torch.inference_mode():
        cached_requests = [
            _request(slot, feature[:cached], ids[1 : cached + 1], k)
            for slot, feature, ids in zip(slots, features, prompts, strict=True)
            if (cached := _split(ids, context)[0])
        ]
        drafter.propose(cached_requests)
        requests = []
        for slot, feature, ids in zip(slots, features, prompts, strict=True):
            cached, new = _split(ids, context)
            requests.append(
                _request(slot, feature[cached : cached + new], ids[cached + 1 : cached + new + 1], k)
            )
        starts = [drafter.slots.length(slot) for slot in slots]

        def step() -> list[Proposal]:
            made = drafter.propose(requests)
            for slot, start in zip(slots, starts, strict=True):
                drafter.slots.commit(slot, start)  # back to the cached entries
            return made

        return _time(step)


def _request(slot: int, features: torch.Tensor, next_ids: list[int], k: int) -> DraftRequest:
    return DraftRequest(
        slot=slot,
        aux_hidden_states=features,
        next_token_ids=next_ids,
        num_tokens=k,
        params=SamplingParams(),
        generator=None,
    )


def _time(step: Callable[[], list[Proposal]]) -> tuple[float, int, list[Proposal]]:
    """Median milliseconds of one engine step (the first two repetitions warm up), the ATen
    operators of one more, and the last step's proposals."""
    times = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1000)
    with DispatchedOps() as ops:
        proposals = step()
    return statistics.median(times[2:]), len(ops.names), proposals


if __name__ == "__main__":
    main()
