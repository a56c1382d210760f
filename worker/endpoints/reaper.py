"""Endpoints whose supervisor was lost (its worker killed, the machine gone) are supervised anew.

Each endpoint worker runs one thread that, every third of ``endpoint_lease_seconds``, looks
for endpoints whose supervisor's heartbeat is older than the lease and queues a new
``endpoint.serve`` task for each under a fresh task id. Taking the endpoint is one
conditional UPDATE (the heartbeat still stale), so of several reapers one queues it; the
new supervisor starts the instances again (the old ones died with their worker), or finishes
a deletion.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from core.services.endpoints import instance_type_of
from db.queries.endpoint import hand_over_endpoint, lost_endpoints
from db.session import session_scope
from db.settings import Settings
from db.types import utc_now

logger = logging.getLogger(__name__)

Enqueue = Callable[[int, str, str], str]


def reap_lost_endpoints(factory: sessionmaker[Session], settings: Settings, enqueue: Enqueue) -> list[int]:
    """Queue a new supervisor for every endpoint whose supervisor is lost; returns their ids."""
    stale_before = utc_now() - timedelta(seconds=settings.endpoint_lease_seconds)
    queued: list[int] = []
    with session_scope(factory) as session:
        candidates = [
            (endpoint, instance_type_of(endpoint.config_spec))
            for endpoint in lost_endpoints(session, stale_before=stale_before)
        ]
    for endpoint, instance_type in candidates:
        if instance_type not in settings.endpoint_instance_types:
            continue  # another deployment's workers serve this type
        task_id = str(uuid.uuid4())
        with session_scope(factory) as session:
            taken = hand_over_endpoint(session, endpoint=endpoint, stale_before=stale_before, task_id=task_id)
        if taken:
            enqueue(endpoint.id, instance_type, task_id)
            logger.warning("endpoint %s lost its supervisor; queued task %s", endpoint.id, task_id)
            queued.append(endpoint.id)
    return queued


class EndpointReaperThread(threading.Thread):
    def __init__(self, factory: sessionmaker[Session], settings: Settings, enqueue: Enqueue) -> None:
        super().__init__(name="endpoint-reaper", daemon=True)
        self.factory = factory
        self.settings = settings
        self.enqueue = enqueue
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.settings.endpoint_lease_seconds / 3):
            try:
                reap_lost_endpoints(self.factory, self.settings, self.enqueue)
            except Exception:
                logger.exception("endpoint reaper round failed")

    def stop(self) -> None:
        self._stopped.set()
