"""The life of one endpoint on a worker: start its instances, keep them up, roll out updates,
stop them on delete. Status goes back through the endpoint's row:

- Creating -> InService once every instance answers; Failed (with FailureReason) when the
  model cannot be fetched or an instance cannot start;
- Updating: the new configuration's instances start beside the serving ones; once they all
  answer, one conditional UPDATE moves the endpoint to the new generation (InvokeEndpoint
  routes by it), and the old instances are stopped with SIGTERM, which lets them finish the
  requests they hold. A rollout that fails leaves the old instances serving (InService, with
  the failure in FailureReason), as SageMaker rolls back;
- Deleting: every instance is stopped and the row removed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from db.models.endpoint import Endpoint
from db.models.endpoint_status import EndpointStatus
from db.queries.endpoint import (
    EndpointStatusChangedError,
    beat_endpoint,
    change_endpoint,
    claim_endpoint,
    delete_endpoint_row,
    get_endpoint_by_id,
)
from db.queries.endpoint_instance import delete_generation_instances
from db.session import session_scope
from db.settings import Settings
from db.types import utc_now
from worker.artifact_cache import cache_root
from worker.endpoints.capture_upload import CaptureUploader
from worker.endpoints.fleet import Fleet
from worker.endpoints.model_files import EndpointFailedError, EndpointOwner, fetch_served_model

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
SWITCH_DRAIN_SECONDS = 2.0
SUPERVISED_STATUSES = frozenset({EndpointStatus.CREATING, EndpointStatus.UPDATING, EndpointStatus.IN_SERVICE})


@dataclass(frozen=True)
class EndpointView:
    """The columns the supervisor acts on, read in one short transaction."""

    status: EndpointStatus
    generation: int
    config_spec: dict[str, Any]
    pending_config_name: str | None
    pending_config_spec: dict[str, Any] | None


class EndpointDeletedError(Exception):
    """The endpoint is Deleting or gone: stop everything."""


class EndpointTakenOverError(Exception):
    """Another supervisor holds the endpoint now (this one missed its lease): stop, change nothing."""


def _view(endpoint_id: int) -> EndpointView | None:
    with session_scope() as session:
        endpoint = get_endpoint_by_id(session, endpoint_id=endpoint_id)
        if endpoint is None:
            return None
        return EndpointView(
            status=endpoint.status,
            generation=endpoint.generation,
            config_spec=dict(endpoint.config_spec),
            pending_config_name=endpoint.pending_config_name,
            pending_config_spec=None
            if endpoint.pending_config_spec is None
            else dict(endpoint.pending_config_spec),
        )


def _change(endpoint_id: int, *, from_statuses: set[EndpointStatus], values: dict[str, Any]) -> bool:
    with session_scope() as session:
        endpoint = get_endpoint_by_id(session, endpoint_id=endpoint_id)
        if endpoint is None:
            return False
        try:
            change_endpoint(session, endpoint=endpoint, from_statuses=from_statuses, values=values)
        except EndpointStatusChangedError:
            return False
        return True


def _delete(endpoint_id: int) -> None:
    with session_scope() as session:
        endpoint = get_endpoint_by_id(session, endpoint_id=endpoint_id)
        if endpoint is not None:
            delete_endpoint_row(session, endpoint=endpoint)


class EndpointSupervisor:
    def __init__(self, endpoint_id: int, settings: Settings, *, task_id: str) -> None:
        self.endpoint_id = endpoint_id
        self.settings = settings
        self.task_id = task_id
        self._last_beat = 0.0
        self.uploader: CaptureUploader | None = None
        self._spec: dict[str, Any] | None = None
        self.log_dir = cache_root(settings) / "endpoints" / f"endpoint-{endpoint_id}"
        self.owner: EndpointOwner | None = None

    def run(self) -> None:
        """Serve until the endpoint is deleted (or fails); returns at once if there is nothing to do."""
        view = _view(self.endpoint_id)
        if view is None:
            return
        if view.status is EndpointStatus.DELETING:
            _delete(self.endpoint_id)
            return
        if view.status not in SUPERVISED_STATUSES or not self._claim():
            return
        fleet: Fleet | None = None
        try:
            self.owner = self._owner()
            self._spec = view.config_spec
            fleet = self._roll_out(view.generation, view.config_spec, self._check_deleted)
            if not _change(
                self.endpoint_id,
                from_statuses={EndpointStatus.CREATING, EndpointStatus.IN_SERVICE},
                values={"status": EndpointStatus.IN_SERVICE},
            ):
                self._check_deleted()  # an update requested meanwhile is picked up below
            fleet = self._serve(fleet)
        except EndpointDeletedError:
            logger.info("endpoint %s deleted: stopping its instances", self.endpoint_id)
        except EndpointTakenOverError:
            logger.warning("endpoint %s is supervised elsewhere now: stopping this copy", self.endpoint_id)
            return  # the finally below stops this copy's instances; the row is the other's now
        except EndpointFailedError as error:
            logger.warning("endpoint %s failed: %s", self.endpoint_id, error)
            _change(
                self.endpoint_id,
                from_statuses=set(SUPERVISED_STATUSES),
                values={"status": EndpointStatus.FAILED, "failure_reason": str(error)[:1024]},
            )
        finally:
            if fleet is not None:
                fleet.stop()
        if self.uploader is not None and self._spec is not None:
            self.uploader.flush(self._spec)  # what was captured before the end still reaches S3
        view = _view(self.endpoint_id)
        if view is not None and view.status is EndpointStatus.DELETING:
            _delete(self.endpoint_id)

    def _owner(self) -> EndpointOwner:
        with session_scope() as session:
            endpoint: Endpoint | None = get_endpoint_by_id(session, endpoint_id=self.endpoint_id)
            if endpoint is None:
                raise EndpointDeletedError
            # arn:aws:sagemaker:<region>:<account>:endpoint/<name>
            aws_account_id = endpoint.arn.split(":")[4]
            owner = EndpointOwner(
                account_id=endpoint.account_id, aws_account_id=aws_account_id, region=endpoint.region
            )
            self.uploader = CaptureUploader(
                self.settings, endpoint_id=self.endpoint_id, endpoint_name=endpoint.name, owner=owner
            )
            return owner

    def _claim(self) -> bool:
        stale_before = utc_now() - timedelta(seconds=self.settings.endpoint_lease_seconds)
        with session_scope() as session:
            claimed = claim_endpoint(
                session, endpoint_id=self.endpoint_id, task_id=self.task_id, stale_before=stale_before
            )
        if not claimed:
            logger.info("endpoint %s has a live supervisor; task %s ends", self.endpoint_id, self.task_id)
        self._last_beat = time.monotonic()
        return claimed

    def _beat(self) -> None:
        """Refresh the lease a few times per lease period (cheap: one UPDATE)."""
        if time.monotonic() - self._last_beat < self.settings.endpoint_lease_seconds / 3:
            return
        with session_scope() as session:
            held = beat_endpoint(session, endpoint_id=self.endpoint_id, task_id=self.task_id)
        if not held:
            raise EndpointTakenOverError
        self._last_beat = time.monotonic()

    def _check_deleted(self) -> EndpointView:
        self._beat()
        view = _view(self.endpoint_id)
        if view is None or view.status is EndpointStatus.DELETING:
            raise EndpointDeletedError
        return view

    def _roll_out(self, generation: int, spec: dict[str, Any], check: Callable[[], object]) -> Fleet:
        """Fetch the model and start a generation's instances; return once all of them answer."""
        assert self.owner is not None
        variant = spec["ProductionVariants"][0]
        model = fetch_served_model(self.settings, owner=self.owner, spec=spec)
        check()
        fleet = Fleet(
            endpoint_id=self.endpoint_id,
            generation=generation,
            variant_name=str(variant["VariantName"]),
            count=int(variant["InitialInstanceCount"]),
            model=model,
            threads=self.settings.endpoint_instance_threads,
            device=self.settings.device,
            log_dir=Path(self.log_dir),
            host=self.settings.endpoint_instance_host,
            advertised=self.settings.endpoint_advertised_host,
        )
        fleet.start()
        try:
            while not fleet.ready():
                time.sleep(POLL_SECONDS)
                fleet.poll()
                check()
        except BaseException:
            fleet.stop()
            raise
        return fleet

    def _serve(self, fleet: Fleet) -> Fleet:
        """Keep the fleet up and roll out updates until the endpoint is deleted (raises then)."""
        while True:
            time.sleep(POLL_SECONDS)
            fleet.poll()
            view = self._check_deleted()
            self._spec = view.config_spec
            if self.uploader is not None:
                self.uploader.flush_if_due(view.config_spec)
            if view.status is EndpointStatus.UPDATING and view.pending_config_spec is not None:
                fleet = self._update(fleet, view)

    def _update(self, fleet: Fleet, view: EndpointView) -> Fleet:
        generation = view.generation + 1
        assert view.pending_config_spec is not None

        def keep_serving() -> None:
            fleet.poll()
            self._check_deleted()

        try:
            new_fleet = self._roll_out(generation, view.pending_config_spec, keep_serving)
        except EndpointFailedError as error:
            logger.warning("endpoint %s: update failed: %s", self.endpoint_id, error)
            with session_scope() as session:
                delete_generation_instances(session, endpoint_id=self.endpoint_id, generation=generation)
            _change(
                self.endpoint_id,
                from_statuses={EndpointStatus.UPDATING},
                values={
                    "status": EndpointStatus.IN_SERVICE,
                    "failure_reason": f"UpdateEndpoint to {view.pending_config_name} failed: {error}"[:1024],
                    "pending_config_name": None,
                    "pending_config_spec": None,
                    "pending_since": None,
                },
            )
            return fleet
        switched = _change(
            self.endpoint_id,
            from_statuses={EndpointStatus.UPDATING},
            values={
                "status": EndpointStatus.IN_SERVICE,
                "generation": generation,
                "config_name": view.pending_config_name,
                "config_spec": view.pending_config_spec,
                "pending_config_name": None,
                "pending_config_spec": None,
                "pending_since": None,
            },
        )
        if not switched:  # deleted meanwhile
            new_fleet.stop()
            raise EndpointDeletedError
        # Requests routed just before the switch may still be on their way to the old
        # instances: give them a moment, then SIGTERM (they finish what they hold, then exit).
        time.sleep(SWITCH_DRAIN_SECONDS)
        fleet.stop()
        with session_scope() as session:
            delete_generation_instances(session, endpoint_id=self.endpoint_id, generation=view.generation)
        return new_fleet
