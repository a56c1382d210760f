"""The producer side of endpoints: queue an endpoint's supervisor on its instance type's queue."""

from __future__ import annotations

import logging

from core.job_queue import producer_app
from core.task_names import SERVE_ENDPOINT
from db.settings import get_settings

logger = logging.getLogger(__name__)


def enqueue_endpoint(endpoint_id: int, instance_type: str, task_id: str | None = None) -> str:
    """Queue the endpoint's supervisor task and return its task id (``task_id`` when given);
    call after the row's commit."""
    settings = get_settings()
    queue = settings.endpoint_queue(instance_type)
    result = producer_app(settings).send_task(
        SERVE_ENDPOINT, args=[endpoint_id], queue=queue, task_id=task_id
    )
    logger.info("queued endpoint %s on %s as task %s", endpoint_id, queue, result.id)
    return str(result.id)
