"""SageMaker's EndpointStatus, value for value, and the statuses the control plane acts on."""

from __future__ import annotations

from enum import StrEnum


class EndpointStatus(StrEnum):
    OUT_OF_SERVICE = "OutOfService"
    CREATING = "Creating"
    UPDATING = "Updating"
    SYSTEM_UPDATING = "SystemUpdating"
    ROLLING_BACK = "RollingBack"
    IN_SERVICE = "InService"
    DELETING = "Deleting"
    FAILED = "Failed"
    UPDATE_ROLLBACK_FAILED = "UpdateRollbackFailed"


# Statuses in which the endpoint's instances answer InvokeEndpoint.
SERVING_STATUSES = frozenset({EndpointStatus.IN_SERVICE, EndpointStatus.UPDATING})
