"""AWS operation handlers, one module per resource; importing this package registers them all."""

from api.operations import endpoint_configs, endpoints, optimization_jobs, sagemaker_models, tags

__all__ = ["endpoint_configs", "endpoints", "optimization_jobs", "sagemaker_models", "tags"]
