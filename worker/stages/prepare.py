"""Stage 'prepare': the base model in the local cache, keyed by its objects' ETags.

A later job on the same model (same ETags) downloads nothing. The data and an existing
head were cached by the stages that checked them ('data', 'validate').
"""

from __future__ import annotations

import time

from worker.artifacts import required
from worker.context import JobContext

# Progress is written to the database at most this often while bytes flow.
PROGRESS_INTERVAL_SECONDS = 2.0


def prepare_inputs(ctx: JobContext) -> None:
    model = required(ctx.artifacts.model, "the validated base model")
    if model.local_dir is not None:  # a model.tar.gz, which 'validate' unpacked into the cache
        ctx.report(
            f"Base model ready in {model.local_dir} (unpacked from {model.location.uri})", fraction=1.0
        )
        return
    megabytes = model.snapshot.total_bytes / 1e6
    ctx.report(f"Fetching the base model {model.location.uri} ({megabytes:.0f} MB)", fraction=0.0)
    last_report = time.monotonic()
    started = last_report

    def progress(done: int, total: int) -> None:
        nonlocal last_report
        now = time.monotonic()
        if now - last_report < PROGRESS_INTERVAL_SECONDS or total == 0:
            return
        last_report = now
        rate = done / max(now - started, 1e-6)
        eta = (total - done) / rate if rate > 0 else None
        ctx.report(
            f"Downloading the base model: {done / 1e6:.0f} of {total / 1e6:.0f} MB",
            fraction=done / total,
            eta_seconds=eta,
        )

    model.local_dir = ctx.cache.fetch(ctx.s3, model.snapshot, kind="models", progress=progress)
    ctx.report(f"Base model ready in {model.local_dir}", fraction=1.0)
