"""Endpoints: the serving processes of a deployed model, started and supervised by a worker task."""
