"""The operator's mapping from DeploymentInstanceType to a Celery queue, and the worker's -Q."""

from __future__ import annotations

import pytest

from core.job_queue import queue_for_job
from db.settings import Settings
from worker.app import worker_argv

GPU_MAPPING = {"ml.g5.*": "gpu", "ml.g6.*": "gpu", "ml.p4d.24xlarge": "a100", "ml.p*": "big-gpu"}


@pytest.mark.parametrize(
    ("instance_type", "queue"),
    [
        ("ml.g5.2xlarge", "gpu"),
        ("ml.g6.xlarge", "gpu"),
        ("ml.p4d.24xlarge", "a100"),  # the first pattern that matches wins
        ("ml.p5.48xlarge", "big-gpu"),
        ("ml.inf2.xlarge", "cpu"),
        ("ML.G5.2XLARGE", "cpu"),  # instance types are lower case; patterns match exactly
        ("", "cpu"),
    ],
)
def test_an_instance_type_goes_to_the_first_matching_queue_else_the_default(
    instance_type: str, queue: str
) -> None:
    settings = Settings(worker_queue="cpu", instance_type_queues=GPU_MAPPING)
    assert queue_for_job(settings, instance_type) == queue


def test_without_a_mapping_every_job_goes_to_the_worker_queue() -> None:
    assert queue_for_job(Settings(worker_queue="optimization-jobs"), "ml.g5.2xlarge") == "optimization-jobs"


def test_the_mapping_is_read_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EAGLENEST_INSTANCE_TYPE_QUEUES", '{"ml.g5.*": "gpu"}')
    assert Settings().instance_type_queues == {"ml.g5.*": "gpu"}


def test_a_worker_consumes_the_queues_it_is_given() -> None:
    assert worker_argv(queues=["gpu", "cpu"])[-2:] == ["-Q", "gpu,cpu"]
    assert "-Q" not in worker_argv()
