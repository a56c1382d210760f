"""The Celery task of an endpoint: its supervisor, on the queue of its variant's instance type."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from core.task_names import SERVE_ENDPOINT
from db.settings import get_settings
from worker.endpoints.supervisor import EndpointSupervisor


@shared_task(
    name=SERVE_ENDPOINT,
    # Acknowledged on delivery: the task runs as long as the endpoint lives, far past any
    # broker visibility timeout, and a redelivered copy would start a second set of instances.
    acks_late=False,
    ignore_result=True,
    bind=True,
)
def serve_endpoint_task(self: Any, endpoint_id: int) -> None:
    EndpointSupervisor(endpoint_id, get_settings()).run()
