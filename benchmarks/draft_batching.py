"""What drafting costs the serving engine per step: one sequence at a time vs the batch at once.

    .venv/bin/python benchmarks/draft_batching.py --head RUN/eagle_model [--k 3] [--batches 1 2 4 8]

For B held-out prompts (the run's ``heldout.jsonl``), the target prefills each prompt once
to get its features; then, per repetition, every sequence commits its features and drafts
K tokens, either with ``Drafter.propose`` in a loop (the head runs K times per sequence) or
with ``propose_batch`` (the head runs K times for the whole batch), with the same weights
packed as the engine packs them. Prints milliseconds per engine step for each batch size
and the proposals' agreement (batched drafts must equal per-sequence ones).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.capture import TargetFeatureCapture
from engine.heads.export import load_head
from engine.packed_linear import pack_linear_layers, packing_available
from speculative.batch_draft import DraftRequest, propose_batch
from speculative.draft import Drafter, Proposal
from speculative.evaluation import chat_prompts
from speculative.sampling import SamplingParams
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
    print(f"K={args.k}, {torch.get_num_threads()} threads, head draft vocabulary {vocabulary}\n")
    print("| sequences | per sequence (ms/step) | batched (ms/step) | speedup | same drafts |")
    print("|---|---|---|---|---|")
    for batch in args.batches:
        if batch > len(prompts):
            print(f"| {batch} | only {len(prompts)} held-out prompts | | | |")
            continue
        requests = _requests(head, vocab, prompts[:batch], features[:batch], args.k)

        def one_by_one(reqs: list[DraftRequest] = requests) -> list[Proposal]:
            return [
                r.drafter.propose(
                    r.aux_hidden_states,
                    r.next_token_ids,
                    num_tokens=r.num_tokens,
                    params=r.params,
                    generator=None,
                )
                for r in reqs
            ]

        def together(reqs: list[DraftRequest] = requests) -> list[Proposal]:
            return propose_batch(head, reqs)

        alone_ms, alone = _time(one_by_one, requests)
        batched_ms, batched = _time(together, requests)
        same = all(a.token_ids.tolist() == b.token_ids.tolist() for a, b in zip(alone, batched, strict=True))
        print(f"| {batch} | {alone_ms:.1f} | {batched_ms:.1f} | {alone_ms / batched_ms:.2f}x | {same} |")


def _requests(
    head: torch.nn.Module, vocab: int, prompts: list[list[int]], features: list[torch.Tensor], k: int
) -> list[DraftRequest]:
    """Each sequence's last few positions as one verification's worth of new features."""
    requests = []
    for ids, feature in zip(prompts, features, strict=True):
        drafter = Drafter(head, vocab)  # type: ignore[arg-type]
        new = min(3, len(ids) - 1)
        requests.append(
            DraftRequest(
                drafter=drafter,
                aux_hidden_states=feature[-new - 1 : -1],
                next_token_ids=torch.tensor(ids[-new:]),
                num_tokens=k,
                params=SamplingParams(),
                generator=None,
            )
        )
    return requests


def _time(
    propose: Callable[[], list[Proposal]], requests: list[DraftRequest]
) -> tuple[float, list[Proposal]]:
    """Median milliseconds of one step, each from a fresh draft cache holding the prompt's
    earlier positions, as a sequence in the middle of its reply has."""
    times = []
    proposals: list[Proposal] = []
    for _ in range(REPETITIONS):
        sessions = [request.drafter.session() for request in requests]
        for session in sessions:
            session.__enter__()
        try:
            with torch.inference_mode():
                started = time.perf_counter()
                proposals = propose()
                times.append((time.perf_counter() - started) * 1000)
        finally:
            for session in sessions:
                session.__exit__(None, None, None)
    return statistics.median(times[2:]), proposals


if __name__ == "__main__":
    main()
