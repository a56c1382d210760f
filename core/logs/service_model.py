"""botocore's CloudWatch Logs service model, read from the installed (pinned) botocore.

Unlike SageMaker's (core/sagemaker/sagemaker_shapes.json), this model is not committed: we
serve four read operations of it, and botocore is pinned in pyproject.toml, so what the
server accepts still moves only with a deliberate bump.
"""

from __future__ import annotations

from functools import lru_cache

from botocore.loaders import Loader

from core.sagemaker.service_model import ServiceModel

LOGS_TARGET_PREFIX = "Logs_20140328"
LOGS_SIGNING_NAME = "logs"


@lru_cache(maxsize=1)
def logs_service_model() -> ServiceModel:
    return ServiceModel(Loader().load_service_model("logs", "service-2"))
