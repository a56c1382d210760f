from __future__ import annotations

import pytest

from db.models.optimization_job_status import OptimizationJobStatus as Status
from worker.outcome import Outcome, final_transition


@pytest.mark.parametrize("current", [Status.COMPLETED, Status.FAILED, Status.STOPPED])
def test_a_finished_job_is_never_reopened(current: Status) -> None:
    for outcome in (Outcome.completed(), Outcome.failed("boom"), Outcome.stopped()):
        assert final_transition(current, outcome) is None


def test_a_stop_request_wins_over_completion() -> None:
    transition = final_transition(Status.STOPPING, Outcome.completed())
    assert transition is not None
    assert transition.status is Status.STOPPED


def test_a_failure_while_stopping_stays_a_failure() -> None:
    assert final_transition(Status.STOPPING, Outcome.failed("disk full")) == Outcome.failed("disk full")


def test_a_running_job_takes_the_outcome() -> None:
    assert final_transition(Status.INPROGRESS, Outcome.completed()) == Outcome.completed()
    failed = final_transition(Status.INPROGRESS, Outcome.failed("Job exceeded MaxRuntimeInSeconds (60 s)"))
    assert failed is not None
    assert failed.failure_reason == "Job exceeded MaxRuntimeInSeconds (60 s)"
