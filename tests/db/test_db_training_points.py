"""A job's training curve: stored per step, read back in order, resumed steps deduplicated, thinned."""

from __future__ import annotations

from itertools import pairwise

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models.training_point import TrainingPoint
from db.queries.optimization_job import delete_optimization_job, get_optimization_job_by_id
from db.queries.training_point import NewTrainingPoint, add_training_points, list_training_points
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job


def point(step: int, loss: float) -> NewTrainingPoint:
    return NewTrainingPoint(
        step=step, total_steps=100, elapsed_seconds=step * 0.5, loss=loss, step_accuracy=[0.5, 0.25]
    )


@pytest.fixture
def job_id(db_session: Session) -> int:
    owner = create_account(db_session)
    job = create_optimization_job(
        db_session, account_id=owner.account_id, aws_account_id=owner.aws_account_id
    )
    return job.id


def test_points_come_back_in_step_order_with_every_field(db_session: Session, job_id: int) -> None:
    add_training_points(db_session, job_id=job_id, points=[point(2, 1.5), point(1, 2.0)])
    curve = list_training_points(db_session, job_id=job_id, max_points=10)
    assert [(p.step, p.loss, p.elapsed_seconds, p.total_steps) for p in curve] == [
        (1, 2.0, 0.5, 100),
        (2, 1.5, 1.0, 100),
    ]
    assert curve[0].step_accuracy == [0.5, 0.25]


def test_a_step_trained_again_after_a_resume_keeps_its_latest_record(
    db_session: Session, job_id: int
) -> None:
    add_training_points(db_session, job_id=job_id, points=[point(1, 2.0), point(2, 1.5), point(3, 1.4)])
    add_training_points(db_session, job_id=job_id, points=[point(3, 1.3), point(4, 1.2)])
    curve = list_training_points(db_session, job_id=job_id, max_points=10)
    assert [(p.step, p.loss) for p in curve] == [(1, 2.0), (2, 1.5), (3, 1.3), (4, 1.2)]


def test_a_long_curve_is_thinned_evenly_and_keeps_its_first_and_last_step(
    db_session: Session, job_id: int
) -> None:
    add_training_points(db_session, job_id=job_id, points=[point(step, 1.0) for step in range(1, 1001)])
    curve = list_training_points(db_session, job_id=job_id, max_points=100)
    steps = [p.step for p in curve]
    assert len(steps) == 100
    assert steps[0] == 1
    assert steps[-1] == 1000
    assert steps == sorted(set(steps))
    assert max(b - a for a, b in pairwise(steps)) <= 11


def test_max_points_must_be_positive(db_session: Session, job_id: int) -> None:
    with pytest.raises(ValueError, match="max_points must be at least 1, got 0"):
        list_training_points(db_session, job_id=job_id, max_points=0)


def test_points_go_with_their_job(db_session: Session, job_id: int) -> None:
    add_training_points(db_session, job_id=job_id, points=[point(1, 2.0)])
    row = get_optimization_job_by_id(db_session, job_id=job_id)
    assert row is not None
    delete_optimization_job(db_session, job=row)
    db_session.expire_all()
    remaining = db_session.scalars(select(TrainingPoint).where(TrainingPoint.job_id == job_id)).all()
    assert remaining == []  # ON DELETE CASCADE
