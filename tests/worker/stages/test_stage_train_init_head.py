"""Which head a job's training starts from: the base head only when it is of the variant asked for."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from core.eagle_knobs import EagleKnobs
from core.s3 import S3Location
from worker.artifacts import HeadInput, TrainingDataInput
from worker.context import JobContext
from worker.s3_snapshot import S3Snapshot
from worker.stages.train import init_head


def _context(*, variant: str | None, base_variant: str | None, tmp_path: Path) -> JobContext:
    snapshot = S3Snapshot(source="s3://bucket/x/", entries=())
    summary: dict[str, Any] = {} if base_variant is None else {"draft_variant": base_variant}
    base = HeadInput(
        location=S3Location.parse("s3://heads/base/", field="BaseHead"),
        snapshot=snapshot,
        local_dir=tmp_path,
        summary=summary,
        origin="base_heads",
    )
    data = TrainingDataInput(
        kind="S3Prefix", uri="s3://data/", snapshot=snapshot, local_dir=tmp_path, files=[]
    )
    environment = {} if variant is None else {"EAGLE_VARIANT": variant}
    context = SimpleNamespace(
        artifacts=SimpleNamespace(base_head=base, data=data), knobs=EagleKnobs.from_environment(environment)
    )
    return cast(JobContext, context)


@pytest.mark.parametrize(
    ("variant", "base_variant", "fine_tunes"),
    [
        (None, "eagle3", True),  # the model's default variant: the base head is of it
        ("eagle3", "eagle3", True),
        ("eagle3", None, True),  # validated before heads recorded it: EAGLE-3
        ("eagle2", "eagle3", False),  # fine-tuning keeps a head's kind, so a new head is trained
        ("peagle", "eagle3", False),
        ("eagle2", "eagle2", True),  # a Qwen3-Next model's base head is EAGLE-2
    ],
)
def test_the_base_head_is_fine_tuned_only_for_its_own_variant(
    variant: str | None, base_variant: str | None, fine_tunes: bool, tmp_path: Path
) -> None:
    context = _context(variant=variant, base_variant=base_variant, tmp_path=tmp_path)
    started_from = init_head(context)
    assert (started_from is not None) is fine_tunes
