"""Drive a server with guidellm at fixed concurrency levels and read back what it measured.

One ``guidellm run`` covers every level (``--profile kind=concurrent`` with
``--override profile.streams 1,2,4,8``): each level sends ``requests_per_level`` requests
with that many in flight at all times. Requests go to ``/v1/completions`` with prompts the
benchmark already rendered in the chat template, ``max_tokens`` fixed per request (guidellm
then sets ``ignore_eos`` so every request generates exactly that many tokens, unless
``stop_at_eos`` sends ``ignore_eos: false`` to let replies end where the model ends them) and
``temperature: 0`` in the request body: greedy decoding, where a draft head's acceptance
is what it would be in a greedy deployment.

guidellm drives each level from one worker process (``guidellm_environment``): its default spawns
a worker process per stream (and a manager), each a fresh interpreter importing guidellm, torch and
transformers, which on a 2-core worker costs more CPU than the requests of a short level.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servebench.guidellm_process import GuidellmClient

logger = logging.getLogger(__name__)

GUIDELLM_VERSION = "0.8.1"


class GuidellmError(RuntimeError):
    """guidellm failed or wrote results this module cannot read."""


@dataclass(frozen=True)
class LevelResult:
    """guidellm's measurements of one concurrency level (means over successful requests)."""

    concurrency: int
    successful_requests: int
    errored_requests: int
    incomplete_requests: int  # still in flight when guidellm ended the level: in no mean
    ttft_ms: float
    tpot_ms: float
    itl_ms: float
    request_throughput: float  # requests/s over the level
    output_throughput: float  # output tokens/s over the level
    otps_per_request: float  # mean of each request's output tokens/s
    output_tokens_mean: float
    prompt_tokens_mean: float
    first_request_start: float  # wall clock, to attribute /metrics counters to this level
    last_request_end: float


def guidellm_arguments(
    *,
    target: str,
    model_name: str,
    tokenizer_dir: Path,
    data_path: Path,
    output_path: Path,
    concurrency: Sequence[int],
    requests_per_level: int,
    max_seconds_per_level: float | None = None,
    stop_at_eos: bool = False,
) -> list[str]:
    """The arguments of ``guidellm`` for one benchmark run (from ``run`` on)."""
    # Without a temperature guidellm sends none: servers sample and acceptance collapses.
    body: dict[str, Any] = {"temperature": 0}
    if stop_at_eos:
        # guidellm merges extras into the body after setting ignore_eos: true, so this wins.
        body["ignore_eos"] = False
    backend = {
        "kind": "openai_http",
        "target": target,
        "model": model_name,
        "request_format": "/v1/completions",
        "extras": {"body": body},
    }
    # A level ends at whichever comes first: its requests, or its time.
    duration = (
        []
        if max_seconds_per_level is None
        else [
            "--constraint",
            f"kind=max_duration,seconds={max_seconds_per_level:g}",
        ]
    )
    return [
        "run",
        "--backend",
        json.dumps(backend),
        "--profile",
        f"kind=concurrent,streams={concurrency[0]}",
        "--override",
        "profile.streams",
        ",".join(str(level) for level in concurrency),
        "--constraint",
        f"kind=max_requests,count={requests_per_level}",
        *duration,
        "--tokenizer",
        f"kind=hf_auto,model={tokenizer_dir}",
        "--data",
        f"kind=json_file,path={data_path}",
        "--output",
        f"kind=json,path={output_path}",
        "--disable-progress",
    ]


# guidellm's settings (GUIDELLM__*) for the benchmark client. One worker process drives every
# stream of a level (asyncio; guidellm allows 1,024 streams a process), and it starts from a
# forkserver instead of a fresh interpreter. Measured on a 2-core Xeon VM against our server, four
# levels (1, 2, 4, 8): on a tiny target a run took 18 s and 7 CPU-seconds against guidellm's
# defaults' 26 s and 30; on SmolLM2 the measured throughputs moved within the VM's noise in three
# alternating pairs (docs/measurements.md, "The benchmark's client").
CLIENT_SETTINGS = {"GUIDELLM__MAX_WORKER_PROCESSES": "1", "GUIDELLM__MP_CONTEXT_TYPE": "forkserver"}


def guidellm_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment guidellm runs in: ``CLIENT_SETTINGS`` unless the caller's environment
    sets them (an operator's own GUIDELLM__* wins)."""
    base = dict(os.environ if environ is None else environ)
    return {**CLIENT_SETTINGS, **base}


# guidellm 0.8.1 cannot compile a level that saw no request at all: when a level's time limit
# (max_duration) runs out before its data loader has handed out the first request, the level ends
# with no timings and guidellm raises this, losing every level of the run. Its data loader forks a
# process per level; on a starved 2-core worker that took longer than the level's limit (CI, session
# 38). Reproduced by delaying guidellm's data loader past the limit. The run is repeated once.
NOTHING_MEASURED = "No measurement start or end times available"
ATTEMPTS_WHEN_NOTHING_MEASURED = 2
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def run_guidellm(
    arguments: list[str], log_path: Path, *, client: GuidellmClient, timeout: float | None = None
) -> None:
    """Run ``guidellm <arguments>`` on ``client``, its output in ``log_path``. A run that failed
    because a level measured nothing is run again once; the failed run's log is kept beside
    (``<name>-attempt-1.log``)."""
    for attempt in range(1, ATTEMPTS_WHEN_NOTHING_MEASURED + 1):
        try:
            _run_once(client, arguments, log_path, timeout)
            return
        except GuidellmError as error:
            if NOTHING_MEASURED not in str(error) or attempt == ATTEMPTS_WHEN_NOTHING_MEASURED:
                raise
            kept = log_path.with_name(f"{log_path.stem}-attempt-{attempt}{log_path.suffix}")
            log_path.replace(kept)
            logger.warning("guidellm measured nothing in a level (%s); running it again", kept)


def _run_once(client: GuidellmClient, arguments: list[str], log_path: Path, timeout: float | None) -> None:
    logger.info("running guidellm: %s", shlex.join(["guidellm", *arguments]))
    try:
        returncode = client.run(arguments, log_path, timeout)
    except TimeoutError as error:
        raise GuidellmError(f"{error}; see {log_path}") from error
    if returncode != 0:
        raise GuidellmError(failure_message(returncode, log_path))


def failure_message(returncode: int, log_path: Path) -> str:
    """Why guidellm failed, the cause first: a job's FailureReason is cut at 1,024 characters,
    and a traceback's last line (the exception) is what says what went wrong."""
    lines = log_path.read_text(errors="replace").splitlines()
    causes = [line for line in lines if _EXCEPTION_LINE.match(line)]
    cause = f" {causes[-1]}" if causes else ""
    tail = "\n".join(lines[-12:])
    return f"guidellm exited with status {returncode}:{cause}\nlast lines of {log_path}:\n{tail}"


def parse_guidellm_report(document: dict[str, Any]) -> list[LevelResult]:
    """One LevelResult per benchmark (concurrency level) in guidellm's JSON output.

    A level whose every request was still in flight when its time limit (max_duration) ended it
    measured nothing: it is left out, and the caller names it as not measured. A level with
    errored requests and no successful one is a real failure.
    """
    try:
        return [_level(benchmark) for benchmark in document["benchmarks"] if not _cut_short(benchmark)]
    except (KeyError, TypeError, ValueError) as error:
        raise GuidellmError(f"unexpected guidellm JSON: {error!r}") from error


def _cut_short(benchmark: dict[str, Any]) -> bool:
    totals = benchmark["metrics"]["request_totals"]
    cut = int(totals["successful"]) == 0 and int(totals["errored"]) == 0 and int(totals["incomplete"]) > 0
    if cut:
        logger.warning(
            "concurrency %s: no request finished before the level's time limit; not measured",
            _streams(benchmark),
        )
    return cut


def load_guidellm_report(path: Path) -> list[LevelResult]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise GuidellmError(f"could not read guidellm's results {path}: {error}") from error
    return parse_guidellm_report(document)


def _level(benchmark: dict[str, Any]) -> LevelResult:
    metrics = benchmark["metrics"]
    totals = metrics["request_totals"]
    successful = benchmark["requests"]["successful"]
    # Errored and cancelled requests also ran drafts on the server: they bound the level too.
    every = [
        request
        for status in ("successful", "errored", "incomplete")
        for request in benchmark["requests"].get(status) or []
        if request.get("request_start_time") is not None and request.get("request_end_time") is not None
    ]
    if not successful:
        raise ValueError(f"no successful request at concurrency {_streams(benchmark)}: {totals}")

    def mean(name: str) -> float:
        return float(metrics[name]["successful"]["mean"])

    tpot, itl = _tpot_and_itl(successful)

    return LevelResult(
        concurrency=_streams(benchmark),
        successful_requests=int(totals["successful"]),
        errored_requests=int(totals["errored"]),
        incomplete_requests=int(totals["incomplete"]),
        ttft_ms=mean("time_to_first_token_ms"),
        tpot_ms=tpot,
        itl_ms=itl,
        request_throughput=mean("requests_per_second"),
        output_throughput=mean("output_tokens_per_second"),
        otps_per_request=sum(float(r["output_tokens_per_second"]) for r in successful) / len(successful),
        output_tokens_mean=mean("output_token_count"),
        prompt_tokens_mean=mean("prompt_token_count"),
        first_request_start=min(float(r["request_start_time"]) for r in every),
        last_request_end=max(float(r["request_end_time"]) for r in every),
    )


def _tpot_and_itl(requests: list[dict[str, Any]]) -> tuple[float, float]:
    """TPOT and ITL as SageMaker's benchmark table means them, averaged over the requests.

    TPOT: time per output token after the first, (last token - first token) / (tokens - 1);
    guidellm names this per-request figure inter_token_latency_ms. ITL: the gap between streamed
    chunks. A server streams one chunk per engine step, and a speculative step streams every token
    it accepted as one chunk, so a request's ITL is its TPOT times its tokens per chunk after the
    first (guidellm's iter_tokens_per_iteration): plain decoding gives ITL = TPOT, EAGLE about the
    acceptance length times TPOT. Requests of one token have neither and are left out.
    """
    pairs = [
        (float(tpot), float(tpot) * float(request.get("iter_tokens_per_iteration") or 1.0))
        for request in requests
        if (tpot := request.get("inter_token_latency_ms")) is not None
    ]
    if not pairs:
        return 0.0, 0.0
    return sum(tpot for tpot, _ in pairs) / len(pairs), sum(itl for _, itl in pairs) / len(pairs)


def _streams(benchmark: dict[str, Any]) -> int:
    return int(benchmark["config"]["strategy"]["streams"])
