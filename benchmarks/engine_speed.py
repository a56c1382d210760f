"""How fast the engine runs the target on this device: one table.

    .venv/bin/python benchmarks/engine_speed.py --device cuda --dtype bfloat16 --rows 64 256
    .venv/bin/python benchmarks/engine_speed.py --device cpu --rows 16 --prompts 32

Rows of the table:
- the cost of one host<->device sync (CUDA only): what every ``.item()``/``.tolist()`` in a step costs;
- batch-1 plain decoding, ms/token: ``SpeculativeDecoder.generate_plain`` (what ``trainer eval``
  times against) and the engine's decode step (``generate_batched`` with one row; CUDA graphs
  on a GPU);
- distillation with features, at each ``--rows``: reply tokens/s and replies/s of
  ``generate_batched`` over the built-in datasets' prompts (greedy, the aux layers recorded as
  ``trainer train`` records them), with the GPU's mean utilisation while it ran;
- the serving engine, 8 concurrent requests: output tokens/s of plain decoding and of EAGLE
  (K=3) with ``--head`` (the shipped head by default; the slot-pool target on CUDA, the exact
  packed target elsewhere);
- last, what the device does not default to: at the most rows, distillation with ended rows
  read at once on a GPU (its default reads them a step late, once the next step is queued,
  ``engine.step_readback``) and with prompts joining as soon as a slot frees (its default waits
  for an eighth of the rows, ``engine.join_policy``); plain serving with each step read at
  once (its default reads a plain step once the next is queued, ``serving.step_rows``);
- the head's draft step (``BatchDrafter``, K=3, 200 entries cached per sequence) for 1 and 8
  sequences, ms: one head forward per chain step for the whole batch (on CUDA one graph
  replay a greedy proposal, and the same proposal eagerly beside it);
- one layer's attention over the slot pool at the largest ``--rows`` (a decode step, and a K=3
  verification), ms, both ways ``engine.grouped_attention`` can run it: the query's groups
  folded into its length (a GPU's default) and SDPA's ``enable_gqa`` (a CPU's).
Run it on a quiet machine. Each figure is taken after a warm-up, and the time of any CUDA graph
captured while it ran (a runner captures each new shape once: a sync, an emptied cache and two
eager runs) is left out, so the figures are steady-state steps.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from engine.cuda_graphs import captures_during
from engine.drafting.batch_draft import BatchDrafter, DraftRequest
from engine.generation import generate_batched
from engine.grouped_attention import fold_mask, grouped_attention
from engine.heads.export import load_head
from engine.heads.model import Eagle3DraftModel
from engine.join_policy import JOIN_SHARE
from engine.packed_generation import Recording
from engine.runner_cache import RunnerCache
from engine.sampling import SamplingParams
from engine.slot_attention import visible_keys
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from speculative import SpeculativeDecoder
from trainer.data.builtin import load_builtin
from trainer.eagle.continuation import context_of

REPO = Path(__file__).resolve().parents[1]
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)
AUX_LAYERS = [2, 14, 26]
NEVER = -1  # a stop id no model emits: every reply runs to its cap


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument("--rows", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--prompts", type=int, default=0, help="distillation prompts (0: twice the rows)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--serving-tokens",
        type=int,
        default=64,
        help="tokens of each of the serving rows' 16 requests (and of the batch-1 decode rows)",
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--head",
        type=Path,
        default=REPO / "heads/smollm2-135m-instruct",
        help="EAGLE-3 head for the serving rows",
    )
    return parser.parse_args()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sync_cost_us(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    value = torch.ones(1, device=device)
    times = []
    for _ in range(200):
        value += 1
        started = time.perf_counter()
        value.item()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def prompts_of(tokenizer: object, count: int) -> list[list[int]]:
    names = ["chitchat", "humaneval", "champ"]
    conversations = [c for name in names for c in load_builtin(name)[: -(-count // len(names)) * 2]]
    contexts = [context_of(c, tokenizer, max_prompt_tokens=256) for c in conversations]  # type: ignore[arg-type]
    return [c.prompt_ids for c in contexts if c is not None][:count]


def decoder_ms_per_token(model: PreTrainedModel, prompt: list[int], tokens: int) -> float:
    decoder = SpeculativeDecoder(model, eos_token_ids=[], pack_weights=False)
    decoder.generate_plain(prompt, max_new_tokens=8)  # warm-up
    with captures_during() as captured:
        result = decoder.generate_plain(prompt, max_new_tokens=tokens)
    return 1000 * (result.target_seconds - captured().seconds) / max(1, len(result.token_ids) - 1)


def engine_ms_per_token(model: PreTrainedModel, prompt: list[int], tokens: int) -> float:
    generate_batched(model, [prompt], stop_ids=[NEVER], max_new_tokens=8, batch_size=1, sampling=GREEDY)
    synchronize(model.device)
    with captures_during() as captured:
        started = time.perf_counter()
        generate_batched(
            model, [prompt], stop_ids=[NEVER], max_new_tokens=tokens, batch_size=1, sampling=GREEDY
        )
        synchronize(model.device)
        seconds = time.perf_counter() - started - captured().seconds
    return 1000 * seconds / tokens


class Utilisation:
    """The GPU's utilisation sampled by nvidia-smi every 100 ms while open (None without it)."""

    def __enter__(self) -> Utilisation:
        smi = shutil.which("nvidia-smi")
        self._process = (
            None
            if smi is None
            else subprocess.Popen(
                [smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100"],
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        return self

    def __exit__(self, *_args: object) -> None:
        self.mean: float | None = None
        if self._process is None:
            return
        self._process.terminate()
        out, _ = self._process.communicate()
        values = [
            float(line.split(",")[0]) for line in out.split() if line.strip().replace(".", "").isdigit()
        ]
        self.mean = statistics.mean(values) if values else None


def distillation(
    model: PreTrainedModel,
    prompts: list[list[int]],
    rows: int,
    tokens: int,
    *,
    overlap: bool | None = None,
    join_at: int | None = None,
) -> tuple[float, float, float | None, int]:
    """Reply tokens/s and replies/s of ``prompts`` at ``rows`` rows, with the GPU's utilisation
    and the graphs the timed run captured (their time left out). As a job's chunks do, the
    timed run takes the runner a warm-up built (its ``rows`` longest prompts: the same pool).
    ``overlap``: when the host reads a step's ended rows; ``join_at``: the free slots a step waits
    for before admitting prompts (None: the device's defaults)."""
    recording = Recording(layers=AUX_LAYERS, dtypes=(torch.bfloat16, torch.float16))
    options = {
        "stop_ids": [NEVER],
        "max_new_tokens": tokens,
        "batch_size": rows,
        "sampling": GREEDY,
        "overlap": overlap,
        "join_at": join_at,
    }
    longest = sorted(prompts, key=len, reverse=True)[:rows]
    with RunnerCache(model) as runners:
        generate_batched(model, longest, recorder=recording.recorder(model), runners=runners, **options)  # type: ignore[arg-type]
        synchronize(model.device)
        with Utilisation() as utilisation, captures_during() as captured:
            started = time.perf_counter()
            replies, _ = generate_batched(
                model,
                prompts,
                recorder=recording.recorder(model),
                runners=runners,
                **options,  # type: ignore[arg-type]
            )
            synchronize(model.device)
            seconds = time.perf_counter() - started - captured().seconds
    generated = sum(len(r.tokens) for r in replies if r is not None)
    return generated / seconds, len(prompts) / seconds, utilisation.mean, captured().captures


def serving_tokens_per_s(
    model: PreTrainedModel,
    prompts: list[list[int]],
    tokens: int,
    head: Eagle3DraftModel | None = None,
    *,
    sampling: SamplingParams = GREEDY,
    overlap: bool | None = None,
) -> float:
    """Output tokens/s of 16 requests, 8 at a time; sampled requests each seeded by their index.
    ``overlap``: whether plain steps are read once the next is queued (None: the device's default)."""
    speculation = FixedSpeculation(3 if head is not None else 0)
    options = {"max_batch_size": 8, "eos_token_ids": [], "pack_weights": False, "overlap": overlap}
    with ServingEngine(model, head, speculation=speculation, **options) as engine:  # type: ignore[arg-type]
        engine.submit(GenerationRequest(prompts[0], 4)).wait(600)  # warm-up
        with captures_during() as captured:
            started = time.perf_counter()
            handles = [
                engine.submit(GenerationRequest(p, tokens, sampling=sampling, seed=index))
                for index, p in enumerate((prompts * 16)[:16])  # as many as 16, repeated if fewer
            ]
            generated = sum(len(h.wait(600)) for h in handles)
            seconds = time.perf_counter() - started - captured().seconds
    return generated / seconds


def draft_step_ms(
    head: Eagle3DraftModel,
    vocab_size: int,
    sequences: int,
    device: torch.device,
    *,
    graphs: bool = True,
    sampled: bool = False,
) -> float:
    """Median ms of one ``BatchDrafter.propose`` (3 new entries, K=3) over 200 cached entries a
    sequence, rolled back after each step as rejected drafts are; ``graphs=False`` drafts
    eagerly where a proposal would replay a CUDA graph; ``sampled``: every sequence samples
    (temperature 0.7, top-p 0.9) from a generator of its own."""
    drafter = BatchDrafter(head, vocab_size, sequences)
    if not graphs:
        drafter._graphs = None
    width = head.fc.in_features
    generator = torch.Generator().manual_seed(0)
    dtype = head.dtype
    params = SamplingParams(0.7, 0.9) if sampled else SamplingParams()
    own = [torch.Generator(device=device).manual_seed(slot) for slot in range(sequences)]

    def request(slot: int, entries: int, num_tokens: int) -> DraftRequest:
        features = torch.randn(entries, width, generator=generator).to(device=device, dtype=dtype)
        ids = torch.randint(0, vocab_size, (entries,), generator=generator).tolist()
        return DraftRequest(slot, features, ids, num_tokens, params, own[slot])

    slots = [drafter.slots.acquire() for _ in range(sequences)]
    times = []
    with torch.inference_mode():
        drafter.propose([request(slot, 200, 1) for slot in slots])
        step = [request(slot, 3, 3) for slot in slots]
        for _ in range(30):
            synchronize(device)
            started = time.perf_counter()
            drafter.propose(step)
            synchronize(device)
            times.append((time.perf_counter() - started) * 1000)
            for slot in slots:
                drafter.slots.commit(slot, 200)
    return statistics.median(times[5:])


def attention_ms(model: PreTrainedModel, rows: int, queries: int, keys: int, *, fold: bool) -> float:
    """Median ms of one layer's masked grouped-query attention over ``keys`` cached positions a
    row (rows at different lengths), its folded mask made once as a slot step makes it."""
    config = model.config
    heads, kv_heads = int(config.num_attention_heads), int(config.num_key_value_heads)
    dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    device, dtype = model.device, model.dtype
    query = torch.randn(rows, heads, queries, dim, device=device, dtype=dtype)
    key, value = (torch.randn(rows, kv_heads, keys, dim, device=device, dtype=dtype) for _ in range(2))
    last = torch.randint(queries, keys - 1, (rows, 1), device=model.device)
    positions = last - torch.arange(queries - 1, -1, -1, device=model.device).view(1, queries)
    mask = visible_keys(positions, keys)
    folded = fold_mask(mask, heads // kv_heads) if fold else None
    times = []
    with torch.inference_mode():
        for _ in range(25):
            synchronize(model.device)
            started = time.perf_counter()
            grouped_attention(query, key, value, mask, None, folded_mask=folded, fold=fold)
            synchronize(model.device)
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times[5:])


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, args.dtype))
    model = model.to(args.device).eval()
    prompts = prompts_of(tokenizer, args.prompts or 2 * max(args.rows))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    threads = torch.get_num_threads()
    print(f"{args.model.name}, {args.dtype}, {name}, torch {torch.__version__}, {threads} threads\n")
    print("| what | figure |\n|---|---|")
    sync = sync_cost_us(device)
    if sync is not None:
        print(f"| one host sync (.item()) | {sync:.1f} µs |")
    tokens = args.serving_tokens
    plain = decoder_ms_per_token(model, prompts[0], tokens)
    print(f"| batch-1 plain decode, SpeculativeDecoder | {plain:.2f} ms/token |")
    print(f"| batch-1 decode, engine step | {engine_ms_per_token(model, prompts[0], tokens):.2f} ms/token |")
    for rows in args.rows:
        tokens_per_s, replies_per_s, busy, captures = distillation(model, prompts, rows, args.max_new_tokens)
        print(
            f"| distillation with features, {rows} rows, {len(prompts)} prompts × ≤{args.max_new_tokens} "
            f"| {tokens_per_s:,.0f} reply tokens/s, {replies_per_s:.1f} replies/s, "
            f"GPU busy {busy_text(busy)}, {captures} graphs captured after the warm-up's |"
        )
    rows = max(args.rows)
    serving = serving_tokens_per_s(model, prompts, tokens)
    print(f"| serving engine, plain, 8 concurrent, 16 × {tokens} tokens | {serving:,.1f} output tokens/s |")
    for queries in (1, 4):
        folded, kept = (attention_ms(model, rows, queries, 1024, fold=fold) for fold in (True, False))
        print(
            f"| one layer's attention, {rows} rows × {queries} queries over 1,024 keys "
            f"| groups folded {folded:.3f} ms, SDPA's enable_gqa {kept:.3f} ms |"
        )
    if (args.head / "config.json").exists():
        head_rows(args, model, prompts, device)
    else:
        print(f"| serving engine and draft step with a head | no head at {args.head} |")
    # Last, so that a slow device spends the table's time limit on the rows above first: the
    # other distillation schedule and admission at the most rows.
    other_schedules(model, prompts, rows, max_new_tokens=args.max_new_tokens, tokens=tokens)


def head_rows(
    args: argparse.Namespace, model: PreTrainedModel, prompts: list[list[int]], device: torch.device
) -> None:
    """Serving with the head, greedy and sampled, and the head's draft step."""
    tokens = args.serving_tokens
    head = load_head(args.head, model).to(device=device, dtype=model.dtype).eval()
    eagle = serving_tokens_per_s(model, prompts, tokens, head)
    print(
        f"| serving engine, EAGLE K=3 ({args.head.name}), 8 concurrent, 16 × {tokens} tokens "
        f"| {eagle:,.1f} output tokens/s |"
    )
    # Sampled serving: each row's drafts, verification and target distributions on the device.
    sampled_eagle = serving_tokens_per_s(model, prompts, tokens, head, sampling=SamplingParams(0.7, 0.9))
    print(
        f"| serving engine, EAGLE K=3, sampled (temperature 0.7, top-p 0.9), 8 concurrent, 16 × {tokens} "
        f"tokens | {sampled_eagle:,.1f} output tokens/s |"
    )
    vocab = int(model.config.vocab_size)
    for sequences, sampled in ((1, False), (8, False), (8, True)):
        milliseconds = draft_step_ms(head, vocab, sequences, device, sampled=sampled)
        figure = f"{milliseconds:.2f} ms"
        if device.type == "cuda":  # the same proposal without its graph
            eager = draft_step_ms(head, vocab, sequences, device, graphs=False, sampled=sampled)
            figure += f" ({eager:.2f} ms eager)"
        how = ", sampled (temperature 0.7, top-p 0.9)" if sampled else ""
        print(f"| draft step, K=3, {sequences} sequences{how} | {figure} |")


def other_schedules(
    model: PreTrainedModel, prompts: list[list[int]], rows: int, *, max_new_tokens: int, tokens: int
) -> None:
    """What the device does not default to: at ``rows`` rows, distillation's other schedule and
    admission; plain serving (``tokens`` a request) with its other schedule."""
    gpu = model.device.type == "cuda"
    # A GPU reads a step once the next is queued (distillation's ended rows, plain serving
    # steps); here the other way: at once on a GPU, a step late on a CPU.
    late = "a step late" if not gpu else "at once"
    speed, _, busy, _ = distillation(model, prompts, rows, max_new_tokens, overlap=not gpu)
    print(
        f"| distillation with features, {rows} rows, ended rows read {late} (the other schedule) "
        f"| {speed:,.0f} reply tokens/s, GPU busy {busy_text(busy)} |"
    )
    serving = serving_tokens_per_s(model, prompts, tokens, overlap=not gpu)
    print(
        f"| serving engine, plain, 8 concurrent, 16 × {tokens} tokens, steps read {late} "
        f"(the other schedule) | {serving:,.1f} output tokens/s |"
    )
    # The other admission: on a GPU each prompt as soon as a slot frees (its default waits for
    # an eighth of the rows, to run fewer eager prefills), on a CPU an eighth at a time.
    join_at = 1 if gpu else max(1, rows // JOIN_SHARE)
    speed, _, busy, _ = distillation(model, prompts, rows, max_new_tokens, join_at=join_at)
    print(
        f"| distillation with features, {rows} rows, prompts join when {join_at} slot(s) are free "
        f"(the other admission) | {speed:,.0f} reply tokens/s, GPU busy {busy_text(busy)} |"
    )


def busy_text(busy: float | None) -> str:
    return "n/a" if busy is None else f"{busy:.0f} %"


if __name__ == "__main__":
    main()
