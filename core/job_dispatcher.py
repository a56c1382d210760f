"""The api's hook into the workers: start a job after its row is committed, or ask it to stop.

The services call it only from after-commit work (``db.session.UnitOfWork.after_commit``),
which the request's unit of work runs once its commit has succeeded.
"""

from __future__ import annotations

from typing import Protocol


class JobDispatcher(Protocol):
    def enqueue_optimization_job(self, job_id: int) -> str:
        """Queue the job; returns the task id. Called only after the job row is committed."""
        ...

    def request_stop(self, job_id: int, task_id: str | None) -> None:
        """Ask the workers to end a job the api has just committed as STOPPING."""
        ...

    def enqueue_endpoint(self, endpoint_id: int, instance_type: str) -> str:
        """Queue the endpoint's supervisor on its instance type's queue; returns the task id."""
        ...


class CeleryJobDispatcher:
    """The real dispatcher: ``core.job_queue`` (Celery), imported on first use.

    Imported lazily so the api starts (and its non-job routes work) without importing
    Celery, and so tests can swap in another dispatcher through ``create_app``.
    """

    def enqueue_optimization_job(self, job_id: int) -> str:
        from core import job_queue  # noqa: PLC0415 - deliberate lazy import, see class docstring

        return job_queue.enqueue_optimization_job(job_id)

    def request_stop(self, job_id: int, task_id: str | None) -> None:
        from core import job_queue  # noqa: PLC0415 - deliberate lazy import, see class docstring

        job_queue.request_stop(job_id, task_id)

    def enqueue_endpoint(self, endpoint_id: int, instance_type: str) -> str:
        from core import endpoint_queue  # noqa: PLC0415 - deliberate lazy import, see class docstring

        return endpoint_queue.enqueue_endpoint(endpoint_id, instance_type)
