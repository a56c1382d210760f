"""Where a job writes: the final layout under S3OutputLocation and its private staging prefix.

Final layout (documented in docs/pipeline.md; consumers treat ``lineage.json`` as the commit marker)::

    eagle_model/config.json, eagle_model/model.safetensors
    benchmark/results.json, benchmark/results.csv
    training/metrics.jsonl
    lineage.json                      written last, after every file above is in place

Everything is first written under ``_staging/job-<id>/`` (checkpoints included, so a
redelivered job resumes from them); publishing copies the finished files to the final
keys and then writes ``lineage.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.head_files import HEAD_FILES
from core.job_spec import JobSpec
from core.model_source import parse_s3_uri
from core.s3 import S3Location

HEAD_DIR = "eagle_model/"
BENCHMARK_JSON = "benchmark/results.json"
BENCHMARK_CSV = "benchmark/results.csv"
TRAINING_METRICS = "training/metrics.jsonl"
LINEAGE = "lineage.json"
STAGING_ROOT = "_staging/"
# Under staging: the trainer's run directory (checkpoints, prepared samples) and the marker
# that training finished.
TRAIN_RUN = "train/"
TRAIN_RESULT = "train/result.json"
# The run directory of a base head this job builds (worker.stages.base_head).
BASE_TRAIN_RUN = "base/"

PUBLISHED_FILES = (
    *(HEAD_DIR + name for name in HEAD_FILES),
    BENCHMARK_JSON,
    BENCHMARK_CSV,
    TRAINING_METRICS,
)


@dataclass(frozen=True)
class OutputLayout:
    final: S3Location
    staging: S3Location

    @classmethod
    def for_job(cls, job: JobSpec) -> OutputLayout:
        uri = job.output_config.s3_output_location
        final = parse_s3_uri(uri, field="OutputConfig.S3OutputLocation").as_directory
        return cls(final=final, staging=final.child(f"{STAGING_ROOT}job-{job.id}/"))

    def published(self, relative: str) -> S3Location:
        return self.final.child(relative)

    def staged(self, relative: str) -> S3Location:
        return self.staging.child(relative)

    @property
    def lineage(self) -> S3Location:
        return self.final.child(LINEAGE)

    @property
    def head_uri(self) -> str:
        return self.final.child(HEAD_DIR).uri
