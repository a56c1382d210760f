"""Speculative-decoding counters from a server's Prometheus ``/metrics``.

vLLM exports ``vllm:spec_decode_num_drafts_total`` (verification steps that had drafts),
``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total`` and
``..._num_accepted_tokens_per_pos_total{position="i"}``; our server exports the same
names under ``eaglenest:``. The difference of two snapshots gives one concurrency level's
acceptance: mean acceptance length = 1 + accepted / drafts (the bonus token included, as
vLLM reports it), acceptance at position i = accepted at i / drafts.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

import httpx

PREFIXES = {"vllm": "vllm:", "eaglenest": "eaglenest:"}
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_POSITION = re.compile(r'position="(\d+)"')


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative counters at one moment, summed over every other label (engine, model)."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted_tokens: float = 0.0
    accepted_per_position: dict[int, float] = field(default_factory=dict)

    def minus(self, earlier: SpecCounters) -> SpecCounters:
        positions = set(self.accepted_per_position) | set(earlier.accepted_per_position)
        return SpecCounters(
            drafts=self.drafts - earlier.drafts,
            draft_tokens=self.draft_tokens - earlier.draft_tokens,
            accepted_tokens=self.accepted_tokens - earlier.accepted_tokens,
            accepted_per_position={
                p: self.accepted_per_position.get(p, 0.0) - earlier.accepted_per_position.get(p, 0.0)
                for p in sorted(positions)
            },
        )

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1.0 + self.accepted_tokens / self.drafts if self.drafts > 0 else None

    @property
    def acceptance_by_position(self) -> list[float]:
        if self.drafts <= 0:
            return []
        return [self.accepted_per_position[p] / self.drafts for p in sorted(self.accepted_per_position)]

    @property
    def mean_draft_tokens(self) -> float | None:
        """Draft tokens per verification step: the K used (its mean when K adapts)."""
        return self.draft_tokens / self.drafts if self.drafts > 0 else None


def parse_spec_counters(text: str, prefix: str) -> SpecCounters:
    """The ``{prefix}spec_decode_*`` counters in a Prometheus text exposition."""
    totals = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0}
    per_position: dict[int, float] = {}
    base = f"{prefix}spec_decode_num_"
    for line in text.splitlines():
        if not line.startswith(base):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, value = match["name"].removeprefix(base), float(match["value"])
        if name == "accepted_tokens_per_pos_total":
            position = _POSITION.search(match["labels"] or "")
            if position is not None:
                index = int(position.group(1))
                per_position[index] = per_position.get(index, 0.0) + value
        elif name.removesuffix("_total") in totals and name.endswith("_total"):
            totals[name.removesuffix("_total")] += value
    return SpecCounters(accepted_per_position=per_position, **totals)


@dataclass(frozen=True)
class Snapshot:
    started: float  # wall clock (time.time(), guidellm's clock) before the request
    finished: float  # and after it
    counters: SpecCounters


class CounterPoller:
    """Reads ``/metrics`` every ``interval`` seconds in a thread while guidellm runs.

    guidellm runs every concurrency level in one process, one level after the other; the
    snapshots bracketing each level's first request start and last request end give that
    level's counters (``window``).
    """

    def __init__(self, url: str, prefix: str, interval: float = 0.25) -> None:
        self._url = f"{url}/metrics"
        self._prefix = prefix
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-poller", daemon=True)
        self.snapshots: list[Snapshot] = []
        self.errors = 0

    def __enter__(self) -> CounterPoller:
        self.snapshots.append(self._snapshot_or_raise())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.snapshots.append(self._snapshot_or_raise())

    def _run(self) -> None:
        with httpx.Client(timeout=10.0) as client:
            while not self._stop.wait(self._interval):
                try:
                    self.snapshots.append(self._take(client))
                except httpx.HTTPError:
                    self.errors += 1  # a missed sample only widens a window

    def _snapshot_or_raise(self) -> Snapshot:
        with httpx.Client(timeout=10.0) as client:
            return self._take(client)

    def _take(self, client: httpx.Client) -> Snapshot:
        started = time.time()
        response = client.get(self._url)
        response.raise_for_status()
        return Snapshot(started, time.time(), parse_spec_counters(response.text, self._prefix))

    def window(self, start: float, end: float) -> SpecCounters:
        """Counters accumulated between wall-clock ``start`` and ``end``: the last snapshot
        finished before ``start`` subtracted from the first one started after ``end``."""
        ordered = sorted(self.snapshots, key=lambda s: s.started)
        before = [s for s in ordered if s.finished <= start]
        after = [s for s in ordered if s.started >= end]
        if not before or not after:
            raise ValueError(f"no /metrics snapshot brackets the window {start:.3f}..{end:.3f}")
        return after[0].counters.minus(before[-1].counters)
