"""AWS operation handlers, one module per resource; importing this package registers them all."""

from api.operations import optimization_jobs, sagemaker_models, tags

__all__ = ["optimization_jobs", "sagemaker_models", "tags"]
