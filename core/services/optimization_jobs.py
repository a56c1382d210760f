"""Create/Describe/List/Stop/DeleteOptimizationJob: the job's life cycle on the api side.

The api creates a job in STARTING and requests stops (STOPPING); every other status
change is the worker's. These functions never commit: the caller's unit of work does
(``db.session.UnitOfWork``). Queueing a job and sending a stop are registered as its
after-commit work, so a worker that picks the task up at once always finds the row, and
nothing is queued or stopped for a transaction that rolled back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from core.eagle_knobs import EagleKnobError, EagleKnobs
from core.job_dispatcher import JobDispatcher
from core.principal import Principal
from core.sagemaker.errors import ResourceInUse, ResourceLimitExceeded, ResourceNotFound, ValidationException
from core.sagemaker.shapes.optimization_jobs import CreateOptimizationJobRequest, ListOptimizationJobsRequest
from core.sagemaker.validation import ConstraintViolation
from core.services.listing import page_request
from core.services.pagination import encode_next_token
from core.services.request_checks import require_s3_uri, require_valid_tags
from core.services.resource_tags import tag_new_resource
from core.services.roles import require_account_role
from core.services.sagemaker_models import model_not_found
from db.arns import optimization_job_arn
from db.errors import NameAlreadyExistsError
from db.models.job_event import JobEvent
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import STOPPABLE_STATUSES, TERMINAL_STATUSES, OptimizationJobStatus
from db.models.resource_tag import ResourceTag
from db.queries.listing import TimeRange
from db.queries.optimization_job import (
    InvalidJobTransitionError,
    JobListFilter,
    JobStatusChangedError,
    count_active_optimization_jobs,
    create_optimization_job,
    delete_optimization_job,
    get_optimization_job_by_name,
    list_job_events,
    list_optimization_jobs,
    set_job_task_id,
    transition_optimization_job,
)
from db.queries.resource_tag import delete_resource_tags, list_resource_tags
from db.queries.sagemaker_model import get_sagemaker_model_by_name
from db.session import UnitOfWork

logger = logging.getLogger(__name__)

SPECULATIVE_DECODING = "SpeculativeDecoding"
DEFAULT_MAX_RESULTS = 50
_UNSUPPORTED_CONFIGS = {
    "model_quantization_config": "ModelQuantizationConfig",
    "model_compilation_config": "ModelCompilationConfig",
    "model_sharding_config": "ModelShardingConfig",
}


@dataclass(frozen=True)
class JobPage:
    jobs: list[OptimizationJob]
    next_token: str | None


def job_not_found(name: str) -> ResourceNotFound:
    return ResourceNotFound(f'Could not find optimization job "{name}".')


def _check_optimization_configs(request: CreateOptimizationJobRequest) -> None:
    for index, config in enumerate(request.optimization_configs, start=1):
        for attribute, member in _UNSUPPORTED_CONFIGS.items():
            if getattr(config, attribute) is not None:
                raise ValidationException.for_member(
                    f"optimizationConfigs.{index}.member",
                    member,
                    f"{member} is not supported: this deployment supports speculative decoding only "
                    "(ModelSpeculativeDecodingConfig with Technique EAGLE)",
                )
        speculative = config.model_speculative_decoding_config
        if speculative is not None and speculative.training_data_source is not None:
            require_s3_uri(
                speculative.training_data_source.s3_uri,
                f"optimizationConfigs.{index}.member.modelSpeculativeDecodingConfig.trainingDataSource.s3Uri",
            )
    count = sum(1 for config in request.optimization_configs if config.model_speculative_decoding_config)
    if count != 1:
        raise ValidationException.for_member(
            "optimizationConfigs",
            f"{count} ModelSpeculativeDecodingConfig",
            "Member must contain exactly one ModelSpeculativeDecodingConfig: "
            "this deployment supports speculative decoding only",
        )


def _check_environment(environment: dict[str, str] | None) -> None:
    try:
        EagleKnobs.from_environment(environment)
    except EagleKnobError as error:
        raise ValidationException.from_violations(
            [
                ConstraintViolation(f"optimizationEnvironment.{key}", value, why)
                for key, value, why in error.problems
            ]
        ) from None


def _resolve_model_source(
    session: Session, principal: Principal, request: CreateOptimizationJobRequest
) -> dict[str, Any] | None:
    """Check ModelSource; for a SageMaker model, return its container to snapshot into the job."""
    source = request.model_source
    if (source.s3 is None) == (source.sage_maker_model is None):
        raise ValidationException.for_member(
            "modelSource", source.to_wire(), "Member must specify exactly one of S3 and SageMakerModel"
        )
    if source.s3 is not None:
        require_s3_uri(source.s3.s3_uri, "modelSource.s3.s3Uri")
        return None
    assert source.sage_maker_model is not None
    name = source.sage_maker_model.model_name
    if not name:
        raise ValidationException.for_member(
            "modelSource.sageMakerModel.modelName", None, "Member must not be null"
        )
    model = get_sagemaker_model_by_name(
        session, account_id=principal.account_id, region=principal.region, name=name
    )
    if model is None:
        raise model_not_found(principal, name)
    container = model.primary_container or (model.containers[0] if model.containers else None)
    if container is None or not (container.get("ModelDataSource") or container.get("ModelDataUrl")):
        raise ValidationException(
            f'Model "{model.arn}" has no model data to optimize: its PrimaryContainer needs '
            "ModelDataSource.S3DataSource or ModelDataUrl pointing at the base model on S3."
        )
    return dict(container)


def create_job(
    unit: UnitOfWork,
    *,
    principal: Principal,
    request: CreateOptimizationJobRequest,
    dispatcher: JobDispatcher,
    max_active_jobs: int,
) -> OptimizationJob:
    """Validate and insert in STARTING (flushed: it has its id); queue it once ``unit`` commits.

    Returns the job; after the commit its task id is set, or it is FAILED if it could not
    be queued.
    """
    session = unit.session
    _check_optimization_configs(request)
    _check_environment(request.optimization_environment)
    require_s3_uri(request.output_config.s3_output_location, "outputConfig.s3OutputLocation")
    require_valid_tags(request.tags)
    require_account_role(session, principal=principal, role_arn=request.role_arn)
    source_container = _resolve_model_source(session, principal, request)
    active = count_active_optimization_jobs(session, account_id=principal.account_id, region=principal.region)
    if active >= max_active_jobs:
        raise ResourceLimitExceeded(
            f"The account already has {active} active optimization jobs in {principal.region} "
            f"(limit {max_active_jobs}); wait for one to finish or stop one."
        )
    arn = optimization_job_arn(
        region=principal.region, aws_account_id=principal.aws_account_id, name=request.optimization_job_name
    )
    try:
        job = create_optimization_job(
            session,
            account_id=principal.account_id,
            name=request.optimization_job_name,
            region=principal.region,
            arn=arn,
            role_arn=request.role_arn,
            model_source=request.model_source.to_wire(),
            deployment_instance_type=request.deployment_instance_type,
            max_instance_count=request.max_instance_count,
            optimization_environment=request.optimization_environment,
            optimization_configs=[config.to_wire() for config in request.optimization_configs],
            output_config=request.output_config.to_wire(),
            stopping_condition=request.stopping_condition.to_wire(),
            vpc_config=None if request.vpc_config is None else request.vpc_config.to_wire(),
            training_plan_arns=request.training_plan_arns,
            optimization_types=[SPECULATIVE_DECODING],
            source_model_container=source_container,
        )
    except NameAlreadyExistsError:
        raise ResourceInUse(
            "Optimization job names must be unique within an AWS account and region, and an optimization "
            f"job with this name already exists ({arn})."
        ) from None
    tag_new_resource(session, principal=principal, arn=arn, tags=request.tags)
    session.flush()
    unit.after_commit(partial(_enqueue, job=job, dispatcher=dispatcher))
    return job


def _enqueue(session: Session, *, job: OptimizationJob, dispatcher: JobDispatcher) -> None:
    """After the job's commit: queue it and record its task id (committed by the unit of work)."""
    try:
        task_id = dispatcher.enqueue_optimization_job(job.id)
    except Exception as error:
        # The job row exists and was acknowledged to nobody yet; failing it (instead of
        # leaving it STARTING for ever) tells the caller what happened via DescribeOptimizationJob.
        logger.exception("could not queue optimization job %s", job.id)
        try:
            transition_optimization_job(
                session,
                job=job,
                status=OptimizationJobStatus.FAILED,
                message="The job could not be queued for a worker",
                failure_reason=f"The job could not be queued for a worker: {error}",
            )
        except InvalidJobTransitionError:
            logger.info("optimization job %s ended meanwhile; it stays as it is", job.id)
        return
    set_job_task_id(session, job=job, task_id=task_id)


def get_job(
    session: Session, *, principal: Principal, name: str, for_update: bool = False
) -> OptimizationJob:
    job = get_optimization_job_by_name(
        session, account_id=principal.account_id, region=principal.region, name=name, for_update=for_update
    )
    if job is None:
        raise job_not_found(name)
    return job


def get_job_history(session: Session, *, job: OptimizationJob) -> tuple[list[JobEvent], list[ResourceTag]]:
    return list_job_events(session, job_id=job.id), list_resource_tags(session, resource_arn=job.arn)


def list_jobs(
    session: Session,
    *,
    principal: Principal,
    request: ListOptimizationJobsRequest,
    summaries_only: bool = True,
) -> JobPage:
    """ListOptimizationJobs; ``summaries_only=False`` loads whole rows (the dashboard shows more)."""
    filters = JobListFilter(
        name_contains=request.name_contains,
        optimization_contains=request.optimization_contains,
        status=None if request.status_equals is None else OptimizationJobStatus(request.status_equals),
        created=TimeRange(after=request.creation_time_after, before=request.creation_time_before),
        last_modified=TimeRange(
            after=request.last_modified_time_after, before=request.last_modified_time_before
        ),
    )
    page, fingerprint = page_request(
        request,
        default_order="Ascending",
        default_max_results=DEFAULT_MAX_RESULTS,
        filters=request.model_dump(exclude={"next_token", "max_results", "sort_by", "sort_order"}),
        account_id=principal.account_id,
        region=principal.region,
    )
    result = list_optimization_jobs(
        session,
        account_id=principal.account_id,
        region=principal.region,
        page=page,
        filters=filters,
        summaries_only=summaries_only,
    )
    return JobPage(jobs=result.items, next_token=encode_next_token(result.next_cursor, fingerprint))


def stop_job(unit: UnitOfWork, *, principal: Principal, name: str, dispatcher: JobDispatcher) -> None:
    """STARTING/INPROGRESS -> STOPPING; the workers are told once ``unit`` commits. Idempotent.

    The change is a conditional UPDATE, not a read and a write: of parallel stops exactly
    one records STOPPING (the others find it STOPPING and succeed), and a job that ended
    after it was read stays ended.
    """
    session = unit.session
    job = get_job(session, principal=principal, name=name)
    if job.status in STOPPABLE_STATUSES:
        try:
            transition_optimization_job(
                session,
                job=job,
                status=OptimizationJobStatus.STOPPING,
                message="Stop requested by StopOptimizationJob",
                from_statuses=STOPPABLE_STATUSES,
            )
        except JobStatusChangedError:
            # Another change won; statuses only move forward, so the job is now STOPPING,
            # ended or deleted.
            session.expire(job)
            job = get_job(session, principal=principal, name=name)
        else:
            unit.after_commit(
                partial(_request_stop, job_id=job.id, task_id=job.celery_task_id, dispatcher=dispatcher)
            )
            return
    if job.status is not OptimizationJobStatus.STOPPING:
        raise ValidationException(
            f'The optimization job "{job.name}" is in status {job.status}; only jobs in STARTING or '
            "INPROGRESS status can be stopped."
        )


def _request_stop(_session: Session, *, job_id: int, task_id: str | None, dispatcher: JobDispatcher) -> None:
    """After STOPPING is committed: tell the workers (revoke the queued task)."""
    try:
        dispatcher.request_stop(job_id, task_id)
    except Exception:
        # The job is STOPPING in the database, which running workers poll; a lost revoke
        # only delays the stop of a job that is still queued.
        logger.exception("could not send the stop request for optimization job %s", job_id)


def delete_job(session: Session, *, principal: Principal, name: str) -> None:
    """Delete an ended job: a DELETE ... WHERE status IN (ended), so of parallel deletes one wins."""
    job = get_job(session, principal=principal, name=name)
    if not job.status.is_terminal:
        raise ValidationException(
            f'Cannot delete optimization job "{job.name}" in status {job.status}. Stop the job and delete it '
            "after it reaches COMPLETED, FAILED or STOPPED."
        )
    if not delete_optimization_job(session, job=job, only_in=TERMINAL_STATUSES):
        # An ended job changes no more: a parallel delete removed it.
        raise job_not_found(name)
    delete_resource_tags(session, resource_arn=job.arn)
