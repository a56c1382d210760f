"""The control plane: SageMaker's AWS JSON 1.1 protocol, the /v1 REST face, health and metrics."""
