"""The Celery task of an endpoint: its supervisor, on the queue of its variant's instance type."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown

from core.endpoint_queue import enqueue_endpoint
from core.task_names import SERVE_ENDPOINT
from db.session import create_db_engine, create_session_factory
from db.settings import get_settings
from worker.endpoints.reaper import EndpointReaperThread
from worker.endpoints.supervisor import EndpointSupervisor

_reapers: list[EndpointReaperThread] = []


@shared_task(
    name=SERVE_ENDPOINT,
    # Acknowledged on delivery: the task runs as long as the endpoint lives, far past any
    # broker visibility timeout, and a redelivered copy would start a second set of instances.
    acks_late=False,
    ignore_result=True,
    bind=True,
)
def serve_endpoint_task(self: Any, endpoint_id: int) -> None:
    EndpointSupervisor(endpoint_id, get_settings(), task_id=str(self.request.id)).run()


def _consumes_endpoint_queues(consumer: Any) -> bool:
    prefix = get_settings().endpoint_queue_prefix
    queues = getattr(getattr(consumer, "task_consumer", None), "queues", None) or []
    return any(str(queue.name).startswith(prefix) for queue in queues)


@worker_ready.connect
def start_endpoint_reaper(sender: Any = None, **_: Any) -> None:
    """An endpoint worker looks for endpoints whose supervisor was lost (worker.endpoints.reaper)."""
    if not _consumes_endpoint_queues(sender):
        return
    settings = get_settings()
    engine = create_db_engine(settings.database_url, pool_size=1, max_overflow=0)
    reaper = EndpointReaperThread(create_session_factory(engine), settings, enqueue_endpoint)
    reaper.start()
    _reapers.append(reaper)


@worker_shutdown.connect
def stop_endpoint_reaper(**_: Any) -> None:
    while _reapers:
        _reapers.pop().stop()
